"""What the commits in a WAL file wrote, by table and index: each frame's page number mapped
to the b-tree that owns the page (SQLite's `dbstat` of the database file), counted over the
frames of the WAL's current generation, with the commits among them.

    cp FILE.db-wal /tmp/wal                          # during a load (bench/autodelivery.sh KEEP=1)
    sqlite3 FILE.db "SELECT pageno, name FROM dbstat" >/tmp/pages   # after it
    python3 bench/wal_pages.py /tmp/pages /tmp/wal [TOP]

Pages the file did not have yet when `dbstat` read it, or that went to the free list, are
counted as `(free or new)`.
"""

import collections
import struct
import sys


def owners(path):
    """Page number -> the name of the table or index that owns it."""
    pages = {}
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            number, name = line.rstrip("\n").split("|", 1)
            pages[int(number)] = name
    return pages


def frames(path):
    """The page numbers of the WAL's frames of its current generation, and its commits."""
    with open(path, "rb") as wal:
        data = wal.read()
    page_size = struct.unpack(">I", data[8:12])[0]
    salts = data[16:24]
    offset, pages, commits = 32, [], 0
    while offset + 24 + page_size <= len(data):
        page, size_after_commit = struct.unpack(">II", data[offset : offset + 8])
        if data[offset + 8 : offset + 16] != salts:
            break  # a frame of an earlier generation: the WAL restarted before it
        pages.append(page)
        commits += 1 if size_after_commit else 0
        offset += 24 + page_size
    return pages, commits


def main():
    pages = owners(sys.argv[1])
    written, commits = frames(sys.argv[2])
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    per_commit = max(commits, 1)
    print(f"{len(written)} frames, {commits} commits, {len(written) / per_commit:.1f} per commit")
    counts = collections.Counter(pages.get(page, "(free or new)") for page in written)
    for name, count in counts.most_common(top):
        print(f"  {name:<40} {count:>7} {count / per_commit:6.1f} per commit")


if __name__ == "__main__":
    main()
