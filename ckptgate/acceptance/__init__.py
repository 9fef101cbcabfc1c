"""The checklist as pytest modules, one per item.

Shipped in the wheel, so ``pytest --pyargs ckptgate.acceptance`` (``ckptgate run``) runs them.
"""
