"""`colltune run` caches the programs it builds (runners/base.py compile_app): the key
covers what is linked, not only the link line. A deployment's lib/libcolltune.a is
rewritten in place by the next `deploy` to the same folder; a key of paths alone kept
the program linked with the old archive (the demo's program then refused the new rules,
naming an algorithm the old archive lacked, and ran the library's collectives)."""
from __future__ import annotations

import subprocess
import types

from colltune.runners.base import compile_app

MAIN = "int answer(void);\n#include <stdio.h>\nint main(void) { printf(\"%d\\n\", answer()); return 0; }\n"


def _archive(tmp_path, value: int) -> str:
    src = tmp_path / "answer.c"
    src.write_text(f"int answer(void) {{ return {value}; }}\n")
    obj, lib = tmp_path / "answer.o", tmp_path / "libanswer.a"
    subprocess.run(["cc", "-c", str(src), "-o", str(obj)], check=True)
    lib.unlink(missing_ok=True)
    subprocess.run(["ar", "rcs", str(lib), str(obj)], check=True)
    return str(lib)


def test_a_rewritten_archive_rebuilds_the_program(tmp_path):
    impl = types.SimpleNamespace(name="cc", cc="cc", identity=lambda: "plain", run_env=lambda: None)
    main = tmp_path / "main.c"
    main.write_text(MAIN)
    cache = str(tmp_path / "cache")
    lib = _archive(tmp_path, 1)
    first = compile_app(impl, str(main), cache, [lib])
    assert subprocess.run([str(first)], capture_output=True, text=True).stdout == "1\n"
    assert compile_app(impl, str(main), cache, [lib]) == first      # unchanged: cached
    lib = _archive(tmp_path, 2)                                      # same path, new content
    second = compile_app(impl, str(main), cache, [lib])
    assert second != first
    assert subprocess.run([str(second)], capture_output=True, text=True).stdout == "2\n"
