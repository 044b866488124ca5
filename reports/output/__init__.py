"""The output folder as a transaction: built aside, listed in a manifest before each file
is made, swapped in, never a user's data lost; leftovers of killed runs cleaned.

- folder.py: staged_output, the transaction
- commit.py: the finished folder put at the path, whatever is there
- plan.py: what --out may replace, decided before any work
- manifest.py: the manifest every output folder carries
- renames.py: renames that never replace
- leftovers.py: a killed or failed run's hidden folder, reported and cleaned

May import: capture.files (its writer claims each file's name in the manifest),
capture.paths.
"""
