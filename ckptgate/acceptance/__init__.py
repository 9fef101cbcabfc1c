"""The checklist as pytest tests: one test per row of the check table
(``test_checklist.py``), and the scaling sweep (``test_scaling.py``, never a verdict).

Shipped in the wheel, so ``pytest --pyargs ckptgate.acceptance`` (``ckptgate run``) runs them.
"""
