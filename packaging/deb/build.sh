#!/usr/bin/env bash
# Builds the Debian package in one command: the release binary, the man page and shell
# completions generated from its CLI definition by the xtask package (so they can't drift from
# the flags, and the daemon doesn't link the generators), then `cargo deb` with the metadata of
# Cargo.toml. Prints the path of the .deb on its last line.
set -euo pipefail
cd "$(dirname "$0")/../.."
# The package's metadata (Cargo.toml) names its files under target/: build there whatever
# CARGO_TARGET_DIR the caller's shell exports.
unset CARGO_TARGET_DIR
if ! command -v cargo-deb >/dev/null 2>&1; then
    echo "cargo-deb not found: cargo install cargo-deb --locked" >&2
    exit 2
fi
# The same build as `cargo run --release`: the libatasmart backend is in it and loads the library
# at run time, so the package Recommends libatasmart4 (Cargo.toml) instead of linking it.
cargo build --release --locked
bin=target/release/ssdwatch
out=target/deb-assets
rm -rf "$out"
mkdir -p "$out"
# ssdwatch.1 and ssdwatch-SUBCOMMAND.1; ssdwatch.bash, _ssdwatch and ssdwatch.fish. The
# generator runs in the dev profile: its output doesn't depend on optimisation, and a release
# build of it would be a second fat-LTO link of the library (the test suite has the dev one).
cargo run --locked --quiet -p xtask -- man "$out/man" >/dev/null
cargo run --locked --quiet -p xtask -- completions "$out" >/dev/null
# gzip -n: no name or time stamp in the header, so the same source gives the same page.
gzip -9n "$out"/man/*.1
# The upstream changelog, and the Debian changelog a non-native package must carry.
gzip -9n <CHANGELOG.md >"$out/changelog.gz"
version=$("$bin" --version | cut -d' ' -f2)
when=$(git log -1 --format=%aD 2>/dev/null || date -R)
cat >"$out/changelog.Debian" <<END
ssdwatch ($version-1) unstable; urgency=medium

  * Package built from the ssdwatch repository at version $version; the changes
    are in /usr/share/doc/ssdwatch/changelog.gz.

 -- The ssdwatch authors <ssdwatch@users.noreply.github.com>  $when
END
cargo deb --no-build --output target/debian/ "$@" | tail -n 1
