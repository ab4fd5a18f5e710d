"""One-command reproductions of published results, side by side with the papers' numbers.

- `satguard`: SATGUARD's evaluation (§4 of the paper): schemes x city pairs x workloads over Starlink
  shell 1, figures in the paper's layout and a "paper vs leoguard" report.
"""
