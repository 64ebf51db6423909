#!/usr/bin/env bash
# Builds the Debian package in one command: the release binary, the man page and shell
# completions generated from its own CLI definition (so they can't drift from the flags), then
# `cargo deb` with the metadata of Cargo.toml. Prints the path of the .deb on its last line.
set -euo pipefail
cd "$(dirname "$0")/../.."
# The package's metadata (Cargo.toml) names its files under target/: build there whatever
# CARGO_TARGET_DIR the caller's shell exports.
unset CARGO_TARGET_DIR
if ! command -v cargo-deb >/dev/null 2>&1; then
    echo "cargo-deb not found: cargo install cargo-deb --locked" >&2
    exit 2
fi
# With the libatasmart backend: dpkg-shlibdeps ($auto) then adds libatasmart0 to Depends.
cargo build --release --locked --features atasmart
bin=target/release/ssdwatch
out=target/deb-assets
rm -rf "$out"
mkdir -p "$out"
# gzip -n: no name or time stamp in the header, so the same source gives the same page.
"$bin" generate man --dir "$out/man"
gzip -9n "$out"/man/*.1
"$bin" generate completions bash >"$out/ssdwatch.bash"
"$bin" generate completions zsh >"$out/_ssdwatch"
"$bin" generate completions fish >"$out/ssdwatch.fish"
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
