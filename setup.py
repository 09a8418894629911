"""Everything about the dlperf wheel is in pyproject.toml, except one file setuptools cannot
place from there: `dlperf-cuda-libs.pth`, which goes to the top of site-packages (see
benchmark/dlperf/cuda_libs.py)."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = Path("benchmark/dlperf-cuda-libs.pth")


class BuildPyWithPth(build_py):
    def run(self):
        super().run()
        self.copy_file(str(PTH), str(Path(self.build_lib, PTH.name)), preserve_mode=False)

    def get_outputs(self, include_bytecode=True):
        return [*super().get_outputs(include_bytecode), str(Path(self.build_lib, PTH.name))]


setup(cmdclass={"build_py": BuildPyWithPth})
