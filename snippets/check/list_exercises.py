# The exercises the check knows, as `--list` names them: what each one
# is, and what your file must define for it (wrapped to the page's width).
import textwrap

from attn_ref.check import EXERCISES

for name, exercise in EXERCISES.items():
    print(f"{name}:")
    print(textwrap.indent(textwrap.fill(exercise.summary, 77), "  "))
    print("  the file defines:")
    for line in exercise.defines.splitlines():
        indent = line[: len(line) - len(line.lstrip())]
        more = indent + ("# " if line.lstrip().startswith("#") else "")
        wrapped = textwrap.wrap(line.strip(), 79 - len(more))
        print(indent + f"\n{more}".join(wrapped))
