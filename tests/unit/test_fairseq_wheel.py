"""tools/fairseq_wheel.py's edit of fairseq's setup.py: only the torch C++/CUDA extensions
go, and a setup.py that is not the expected text stops the build instead of being guessed at.
(The build itself runs in `make install`, against the pinned sdist.)"""

from __future__ import annotations

import pytest

from tools.fairseq_wheel import (
    SDIST,
    TORCH_CPU_EXTENSIONS,
    TORCH_CUDA_EXTENSIONS,
    RecipeError,
    build_wheel,
    trim_setup_py,
)

HEAD = """from torch.utils import cpp_extension

extensions = [
    Extension("fairseq.libbleu", sources=["fairseq/clib/libbleu/libbleu.cpp"]),
    NumpyExtension("fairseq.data.data_utils_fast", sources=["a.pyx"]),
    NumpyExtension("fairseq.data.token_block_utils_fast", sources=["b.pyx"]),
]

"""
TAIL = """
cmdclass = {"build_ext": cpp_extension.BuildExtension}
"""


def setup_py(newline: str = "\n") -> str:
    text = HEAD + TORCH_CPU_EXTENSIONS + TORCH_CUDA_EXTENSIONS + TAIL
    return text.replace("\n", newline)


@pytest.mark.parametrize("newline", ["\n", "\r\n"], ids=["lf", "crlf (as in the sdist)"])
def test_only_the_torch_extensions_are_removed(newline):
    trimmed = trim_setup_py(setup_py(newline))
    assert "CppExtension" not in trimmed
    assert "libnat" not in trimmed and "libbase" not in trimmed
    assert trimmed.startswith(HEAD.rstrip("\n"))
    assert trimmed.rstrip().endswith(TAIL.strip())


def test_a_setup_py_without_the_expected_block_stops_the_build():
    with pytest.raises(RecipeError, match="once, found 0"):
        trim_setup_py(HEAD + TORCH_CUDA_EXTENSIONS + TAIL)


def test_a_torch_extension_left_after_trimming_stops_the_build():
    extra = 'ext = cpp_extension.CppExtension("fairseq.other", sources=["x.cpp"])\n'
    with pytest.raises(RecipeError, match="still declares"):
        trim_setup_py(setup_py() + extra)


def test_losing_an_extension_sweeper_needs_stops_the_build():
    text = setup_py().replace('"fairseq.data.data_utils_fast"', '"fairseq.data.other"')
    with pytest.raises(RecipeError, match="data_utils_fast"):
        trim_setup_py(text)


def test_a_local_sdist_that_is_not_the_pinned_file_is_refused_before_building(tmp_path):
    sdist = tmp_path / SDIST
    sdist.write_bytes(b"not fairseq")
    with pytest.raises(RecipeError, match="sha256"):
        build_wheel(tmp_path / "work", sdist)
    assert not (tmp_path / "work").exists()
