"""One run-and-judge per checklist item: measure on the target, then answer with an ``Item``.

Each module takes a ``CheckContext`` (the collaborators: profile, sizing, plan, target, ranks,
nodes) and returns report items; the registry of which function answers which item is
``ckptgate.sizing.checklist``. The acceptance modules only ask, record and assert.
"""
