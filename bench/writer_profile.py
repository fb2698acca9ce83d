"""Where a thread's time went, from `perf script -F ip,sym` of a `perf record --call-graph
dwarf` run (bench/autodelivery.sh PROFILE=1 records the writer thread): each named frame's
inclusive share of the samples, counted once per sample, and the leaf functions' shares.

    perf script -i writer.perf -F ip,sym | python3 bench/writer_profile.py [TOP]
"""

import collections
import sys


def samples(lines):
    """The call stacks, leaf first, each a list of symbol names."""
    stack = []
    for line in lines:
        line = line.rstrip("\n")
        if not line.strip():
            if stack:
                yield stack
            stack = []
            continue
        parts = line.strip().split(None, 1)
        stack.append(parts[1] if len(parts) > 1 else parts[0])
    if stack:
        yield stack


def main():
    top = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    stacks = list(samples(sys.stdin))
    if not stacks:
        sys.exit("no samples")
    inclusive = collections.Counter()
    leaves = collections.Counter()
    for stack in stacks:
        leaves[stack[0]] += 1
        # The project's named functions (not the closures and generic wrappers around
        # them), each once per sample (recursion and inlined copies alike).
        for name in {frame for frame in stack if frame.startswith("leadrelay_")}:
            inclusive[name] += 1
    total = len(stacks)
    print(f"{total} samples")
    print("the project's functions, inclusive:")
    for name, count in inclusive.most_common(top):
        print(f"  {100 * count / total:5.1f}%  {name[:110]}")
    print("leaf functions:")
    for name, count in leaves.most_common(top // 2):
        print(f"  {100 * count / total:5.1f}%  {name[:110]}")


if __name__ == "__main__":
    main()
