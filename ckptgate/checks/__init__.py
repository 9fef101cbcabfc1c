"""The checks: one module per check of the checklist, each ending with ``CHECK = Check(...)``
(``check.py``): what it measures with a workload, the rows it answers with an ``Item`` each,
and the report sections it owns. ``table.py`` finds every check and gives the plugin, the
acceptance test and the report what they derive from it. The acceptance test only asks,
records and asserts.
"""
