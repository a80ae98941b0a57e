"""Download a package's source distribution from PyPI's simple index and unpack it (for reading its source in tests).

pip cannot download an sdist without preparing its metadata, which for vllm-ascend needs its build toolchain; the
simple index serves the tarball itself. Usage: fetch_sdist.py NAME VERSION DEST (DEST gets the tarball's top folder's
contents)."""

import hashlib
import re
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

INDEX = "https://pypi.org/simple/{name}/"


def main(name: str, version: str, dest: str) -> None:
    page = urllib.request.urlopen(INDEX.format(name=name), timeout=120).read().decode()
    wanted = f"{name.replace('-', '_')}-{version}.tar.gz"
    links = [url for url, text in re.findall(r'href="([^"]+)"[^>]*>([^<]+)<', page) if text == wanted]
    if not links:
        sys.exit(f"fetch_sdist: {wanted} not on the index")
    url, _, digest = links[0].partition("#sha256=")
    with tempfile.TemporaryDirectory() as tmp:
        tarball = Path(tmp) / wanted
        urllib.request.urlretrieve(url, tarball)
        if digest and hashlib.sha256(tarball.read_bytes()).hexdigest() != digest:
            sys.exit(f"fetch_sdist: {wanted}: sha256 does not match the index")
        target = Path(dest)
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(tarball) as archive:
            for member in archive.getmembers():
                parts = Path(member.name).parts[1:]  # drop the top folder
                if not parts or ".." in parts or member.issym() or member.islnk():
                    continue
                member.name = str(Path(*parts))
                archive.extract(member, target, filter="data")


if __name__ == "__main__":
    main(*sys.argv[1:4])
