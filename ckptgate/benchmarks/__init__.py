"""Side-by-side comparisons of the suite's drivers with fio on the same target."""
