#!/usr/bin/env bash
# The visibility sweep (issue 12): every module and item crate-visible unless the binary,
# tests/, examples/, bench/ or fuzz/ name it by path. Repeatable on any main (run it after
# merging a branch that opened things up, then judge what it prints):
#   1. `pub mod X` in src/lib.rs (and `pub mod Y` one level down) becomes `pub(crate)` when
#      nothing outside src/ names `leadrelay::X` (`leadrelay::X::Y`);
#   2. the compiler does the item-level work: rustc's `unreachable_pub` lint (switched on
#      by src/lib.rs's `#![warn(unreachable_pub)]`, not by RUSTFLAGS, which would rebuild
#      every dependency) suggests `pub(crate)` for every item no longer reachable from the
#      crate root, and `cargo fix` applies it to the library and its unit tests, until
#      nothing changes;
#   3. what is left is `dead_code` warnings, for a person to judge (delete, or #[cfg(test)]).
# src/lib.rs keeps `#![warn(unreachable_pub)]`, which clippy's -D warnings makes an error.
set -euo pipefail
cd "$(dirname "$0")/.."

outside() { grep -rhoE "leadrelay::[a-z_]+(::[a-z_]+)?" tests examples bench fuzz/fuzz_targets src/main.rs | sed 's/leadrelay:://' | sort -u; }
named="$(outside)"
for top in $(grep -oE "^pub mod [a-z_]+" src/lib.rs | awk '{print $3}'); do
    if ! grep -qx "$top" <<<"$(cut -d: -f1 <<<"$named")"; then
        sed -i "s/^pub mod $top;/pub(crate) mod $top;/" src/lib.rs
        continue
    fi
    [ -f "src/$top/mod.rs" ] || continue
    for sub in $(grep -oE "^pub mod [a-z_]+" "src/$top/mod.rs" | awk '{print $3}'); do
        grep -qx "$top::$sub" <<<"$named" || sed -i "s/^pub mod $sub;/pub(crate) mod $sub;/" "src/$top/mod.rs"
    done
done

grep -qx '#!\[warn(unreachable_pub)\]' src/lib.rs || sed -i '0,/^$/s//\n#![warn(unreachable_pub)]/' src/lib.rs
for _ in 1 2 3; do
    before="$(git diff --stat | tail -1)"
    cargo fix --lib --allow-dirty --allow-staged --quiet || true
    cargo fix --lib --tests --allow-dirty --allow-staged --quiet || true
    [ "$before" = "$(git diff --stat | tail -1)" ] && break
done
cargo fmt
cargo check --lib --tests 2>&1 | grep -E "^warning" -A3 || true
