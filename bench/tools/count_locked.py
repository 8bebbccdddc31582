#!/usr/bin/env python3
"""Counts the locked instructions a program executes, per unit of work.

Locked read-modify-writes (`lock`-prefixed instructions, `xchg` with memory) and
`mfence` drain the store buffer: on the hot paths of wsched they cost more than
their instruction counts suggest, and timing them on a noisy VM is hopeless. This
counts them exactly: run the program under callgrind with per-instruction counts,
disassemble it, and add up the executions of each such instruction.

    valgrind --tool=callgrind --dump-instr=yes --dump-line=no \\
        --callgrind-out-file=/tmp/cg.out \\
        target/release/examples/step_cost 40000 chain
    objdump -d --no-show-raw-insn -C target/release/examples/step_cost > /tmp/sc.asm
    python3 bench/tools/count_locked.py /tmp/sc.asm /tmp/cg.out 90000

The last argument divides the counts (for `step_cost`: the case's units times its 9
runs, e.g. 40000 / 4 links of a chain times 9). Prints the instructions executed at
least 0.05 times a unit, by function, then the total per unit. Standard library only.
"""

import collections
import re
import sys


def locked_instructions(asm_path):
    """Address -> (function, instruction) of every locked instruction in `asm_path`."""
    locked = {}
    function = None
    for line in open(asm_path, encoding="utf-8", errors="replace"):
        header = re.match(r"^([0-9a-f]+) <(.*)>:$", line)
        if header:
            function = header.group(2)
            continue
        insn = re.match(r"^\s*([0-9a-f]+):\s+(.*)$", line)
        if insn and re.search(r"\block\b|\bxchg\b|mfence", insn.group(2)):
            locked[int(insn.group(1), 16)] = (function, insn.group(2).strip())
    return locked


def executions(callgrind_path, wanted):
    """Address -> times executed, for the addresses in `wanted` (callgrind's
    compressed per-instruction format: absolute, `+n`, `-n` or `*` addresses; the
    line after a `calls=` line is a call's inclusive cost, not the instruction's)."""
    counts = collections.Counter()
    previous = 0
    after_call = False

    def number(text):
        return int(text, 16) if text.startswith("0x") else int(text)

    for line in open(callgrind_path, encoding="utf-8", errors="replace"):
        if line.startswith("calls="):
            after_call = True
            continue
        if not line or line[0] not in "+-*0123456789":
            continue
        fields = line.split()
        where = fields[0]
        if where == "*":
            address = previous
        elif where.startswith("+"):
            address = previous + number(where[1:])
        elif where.startswith("-"):
            address = previous - number(where[1:])
        else:
            address = number(where)
        previous = address
        if after_call:
            after_call = False
            continue
        if address in wanted and len(fields) > 1:
            counts[address] += int(fields[1])
    return counts


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    locked = locked_instructions(sys.argv[1])
    counts = executions(sys.argv[2], locked)
    units = float(sys.argv[3]) if len(sys.argv) == 4 else 1.0
    by_site = collections.Counter()
    for address, times in counts.items():
        function, insn = locked[address]
        by_site[f"{function[:100]} | {insn[:40]}"] += times
    for site, times in by_site.most_common():
        if times / units >= 0.05:
            print(f"{times / units:7.2f}  {site}")
    print(f"total per unit: {sum(counts.values()) / units:.2f}")


if __name__ == "__main__":
    main()
