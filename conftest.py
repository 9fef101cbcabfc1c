"""The checkout's root conftest: nothing to add.

The ckptgate plugin (options, fixtures, the gate report) is loaded by its ``pytest11`` entry
point, ``ckptgate.fixtures.plugin``, in a checkout and from any directory alike.
"""
