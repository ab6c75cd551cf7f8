# The exercises the check knows, as `--list` names them: what each one
# is, and what your file must define for it.
from attn_ref.check import EXERCISES

for name, exercise in EXERCISES.items():
    print(f"{name}: {exercise.summary}; the file defines")
    print(exercise.defines)
