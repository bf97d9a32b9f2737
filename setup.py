"""Maps the source folders to the import names: core/ is `jevqueue`, plugins/ is `jevqueue.plugins`.

pyproject.toml holds all metadata; this file only lists the packages, because
setuptools' automatic discovery cannot rename folders.
"""

from setuptools import find_packages, setup


def _under(prefix: str, folder: str) -> list[str]:
    return [prefix] + [f"{prefix}.{name}" for name in find_packages(folder)]


setup(packages=_under("jevqueue", "core") + _under("jevqueue.plugins", "plugins"))
