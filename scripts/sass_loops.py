#!/usr/bin/env python3
"""Local-memory traffic inside kernel loops, from the SASS of built CUDA objects.

ptxas -v reports a kernel's spill bytes but not where they sit: a spill stored in the prologue
and read once is free, one reloaded every step of the non-zero loop is not (docs/GPU_NOTES.md:
the float32-output half SpMM lost 12% to two such reloads). This lists, for every kernel whose
name matches FILTER, each loop (a backward branch and its target) that holds LDL/STL
instructions, with its size, its 128-bit global loads and the local operations themselves.

    scripts/sass_loops.py build [FILTER]        # every *.cu.o under the build folder
    scripts/sass_loops.py path/to/x.cu.o [FILTER]

Needs cuobjdump (CUDA toolkit; CUOBJDUMP=path, else on PATH, else /usr/local/cuda/bin). Where the
toolkit has none, PyPI's `nvidia-cuda-cuobjdump` wheel carries it (nvidia/cu13/bin/cuobjdump);
`-sass` also runs nvdisasm from PATH, which PyPI's `nvidia-cuda-nvdisasm` wheel carries (unzip
both wheels into one folder and put its nvidia/cu13/bin on PATH). A single .cu file's cubin,
without a build: nvcc -cubin -arch=sm_90 -O3 -std=c++17 --expt-relaxed-constexpr -Iinclude -Isrc.
"""
import glob
import os
import re
import shutil
import subprocess
import sys


def cuobjdump():
    for c in (os.environ.get("CUOBJDUMP"), shutil.which("cuobjdump"),
              "/usr/local/cuda/bin/cuobjdump"):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    sys.exit("sass_loops: cuobjdump not found (set CUOBJDUMP; see the docstring)")


def demangle(name):
    try:
        out = subprocess.run(["c++filt", name], capture_output=True, text=True).stdout.strip()
    except OSError:
        return name
    return re.sub(r"spgnn::(detail::)?(\(anonymous namespace\)::)?", "", out or name)


def loops_with_local_ops(sass_of_function):
    ins = [(int(a, 16), text.strip())
           for a, text in re.findall(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass_of_function)]
    for addr, text in ins:
        m = re.search(r"BRA (?:\S+ )?0x([0-9a-f]+)", text)
        if not m or int(m.group(1), 16) >= addr:
            continue
        lo, hi = int(m.group(1), 16), addr
        body = [t for a, t in ins if lo <= a <= hi]
        local = [t for t in body if re.search(r"\b(LDL|STL)\b", t)]
        if local:
            yield lo, hi, len(body), sum("LDG.E.128" in t for t in body), local


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    target, pattern = argv[1], (argv[2] if len(argv) > 2 else "")
    objs = ([target] if os.path.isfile(target)
            else sorted(glob.glob(os.path.join(target, "**", "*.cu.o"), recursive=True)))
    if not objs:
        sys.exit(f"sass_loops: no CUDA objects under '{target}'")
    tool = cuobjdump()
    for obj in objs:
        sass = subprocess.run([tool, "-sass", obj], capture_output=True, text=True).stdout
        for func in sass.split("Function : ")[1:]:
            name = demangle(func.split("\n", 1)[0].strip())
            if pattern and pattern not in name:
                continue
            for lo, hi, n, gathers, local in loops_with_local_ops(func):
                print(f"{os.path.basename(obj)}: {name[:120]}\n  loop {lo:#x}-{hi:#x}: {n} "
                      f"instructions, {gathers} 128-bit global loads, {len(local)} local: "
                      f"{'; '.join(local[:4])}{' ...' if len(local) > 4 else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
