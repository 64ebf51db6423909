#!/usr/bin/env bash
# Runs the whole test suite: installs what the tests need (Debian/Ubuntu, as root), then
# formatting, lints, unit/integration tests (root-only ones skip with a message elsewhere),
# Prometheus rule tests and the end-to-end VM suite.
set -euo pipefail
cd "$(dirname "$0")/.."
run_t0=$(date +%s)
# --preflight: only find the toolchain (as the run would) and print it; nothing is installed or
# run. tests/it/run_script.rs checks it in the environments sudo and su give root.
PREFLIGHT=""
[ "${1:-}" = "--preflight" ] && PREFLIGHT=1

APT_PACKAGES=(smartmontools fio prometheus fuse3 e2fsprogs xfsprogs btrfs-progs util-linux python3 python3-fusepy
              qemu-system-x86 linux-image-amd64 busybox-static kmod cpio dmsetup mdadm nvme-cli python3-matplotlib
              nbdkit nbdkit-plugin-python curl libatasmart4 chromium lintian mmdebstrap strace systemd
              lvm2 thin-provisioning-tools prometheus-node-exporter postgresql postgresql-client victoria-metrics
              mariadb-server mariadb-client time)

need=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || need+=("$p")
done
if [ ${#need[@]} -gt 0 ] && [ -z "$PREFLIGHT" ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "== installing: ${need[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "== not root: cannot install ${need[*]}; tests that need them will skip" >&2
  fi
fi

# Under sudo, root's PATH lacks the invoking user's rustup toolchain: use it from there.
if ! command -v cargo >/dev/null 2>&1 && [ -n "${SUDO_USER:-}" ]; then
  user_home=$(getent passwd "$SUDO_USER" | cut -d: -f6 || true)
  if [ -x "$user_home/.cargo/bin/cargo" ]; then
    export PATH="$user_home/.cargo/bin:$PATH"
    export RUSTUP_HOME="${RUSTUP_HOME:-$user_home/.rustup}"
  fi
fi
# As root without sudo (su, a CI job), root's own rustup toolchain may be off PATH.
if ! command -v cargo >/dev/null 2>&1 && [ -x "${CARGO_HOME:-$HOME/.cargo}/bin/cargo" ]; then
  export PATH="${CARGO_HOME:-$HOME/.cargo}/bin:$PATH"
fi
command -v cargo >/dev/null 2>&1 || { echo "cargo not found: install Rust 1.89+ with rustup (https://rustup.rs)" >&2; exit 2; }
rust_minor=$(cargo --version | sed -n 's/^cargo 1\.\([0-9]*\).*/\1/p')
if [ -z "$rust_minor" ] || [ "$rust_minor" -lt 89 ]; then
  echo "$(command -v cargo) is $(cargo --version); ssdwatch needs Rust 1.89+ (rustup: https://rustup.rs)" >&2
  exit 2
fi
if [ -n "$PREFLIGHT" ]; then
  echo "cargo: $(command -v cargo) ($(cargo --version))"
  exit 0
fi

# cargo-deb builds the Debian package (tests/it/packaging/deb.rs); installed once into cargo's
# bin directory and kept there.
cargo_bin="${CARGO_HOME:-$HOME/.cargo}/bin"
case ":$PATH:" in *":$cargo_bin:"*) ;; *) export PATH="$PATH:$cargo_bin" ;; esac
if ! command -v cargo-deb >/dev/null 2>&1; then
  echo "== installing cargo-deb into $cargo_bin"
  cargo install cargo-deb --locked --quiet
fi

# As root every package above is installed, so no test has a reason to skip: make a skip fail.
# smartctl and fstrim live in /usr/sbin, which `su` without `-` leaves off PATH.
if [ "$(id -u)" -eq 0 ]; then
  export PATH="$PATH:/usr/sbin:/sbin"
  export SSDWATCH_TESTS_STRICT="${SSDWATCH_TESTS_STRICT-1}"
fi

# How long each step took, printed at the end (and when a step fails): the run must stay well
# inside CI's limit, and this says where its time goes.
step_name="installing what the tests need (apt packages, cargo-deb)"
step_t0=$run_t0
steps=()
step() {
  local now
  now=$(date +%s)
  [ -n "$step_name" ] && steps+=("$(printf '%5d s  %s' $((now - step_t0)) "$step_name")")
  step_name=$1
  step_t0=$now
  [ -n "$step_name" ] && echo "== $step_name"
  return 0
}
warm_pid=""
finish() {
  local rc=$?
  step ""
  [ -n "$warm_pid" ] && kill -- "-$warm_pid" 2>/dev/null
  echo "== time per step (exit $rc, $(($(date +%s) - run_t0)) s in all)"
  printf '%s\n' "${steps[@]}"
}
trap finish EXIT

# What the QEMU suites cache per machine (the systemd guest's root filesystem, the OpenZFS
# modules: about 10 minutes of both cores on a machine without the cache) is built from here on
# at the lowest CPU priority, beside the builds and tests, rather than in the middle of the suites.
if [ "$(id -u)" -eq 0 ]; then
  mkdir -p target
  # In a session of its own, so that stopping it early stops its builds too.
  setsid nice -n 19 bash tests/vm/warm-cache.sh >target/vm-cache-warm.log 2>&1 &
  warm_pid=$!
fi

# Everything is built once with the default features, as `cargo build --release` and the .deb
# are (the libatasmart backend, which loads libatasmart4 at run time, is one of them).
FEATURES=()

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy"
cargo clippy --all-targets "${FEATURES[@]}" -- -D warnings
step "cargo clippy (without the libatasmart backend)"
cargo clippy --lib --bins --no-default-features -- -D warnings
step "cargo clippy and test of xtask (man pages and completions)"
cargo clippy -p xtask --all-targets -- -D warnings
cargo test -p xtask
step "the simulated SSD's model (tests/vm/ftl)"
/usr/bin/python3 -m unittest discover -s tests/vm/ftl
# The .deb's release build (fat LTO, one codegen unit: minutes of both cores) is made before the
# tests, with packaging/deb/build.sh's own flags, so packaging::deb finds it done instead of
# compiling beside the tests of the same binary that time themselves.
step "cargo build --release (the binary the .deb packages)"
(unset CARGO_TARGET_DIR; cargo build --release --locked "${FEATURES[@]}")
step "cargo test (library, binary, integration tests)"
cargo test "${FEATURES[@]}" --lib --bins --tests -- --test-threads=2
step "cargo test --benches (each benchmark runs once, as a smoke test)"
cargo test "${FEATURES[@]}" --bench '*'
# The QEMU suites are the integration binary's ignored tests (tests/it/vm/), one module each.
step "waiting for the VM cache (target/vm-cache-warm.log)"
if [ -n "$warm_pid" ]; then
  wait "$warm_pid" || true
  warm_pid=""
  cat target/vm-cache-warm.log
fi
step "VM suite (boots a QEMU guest with NVMe, SATA, virtio, dm and md drives)"
cargo test "${FEATURES[@]}" --test it -- --ignored --test-threads=2 vm::drives::
step "layers below filesystems (a QEMU guest with LVM thin, md and OpenZFS; builds the ZFS modules once per machine)"
cargo test "${FEATURES[@]}" --test it -- --ignored --test-threads=2 vm::layers::
step "the .deb under systemd (a QEMU guest booting Debian with systemd; its root filesystem is built once and cached)"
cargo test "${FEATURES[@]}" --test it -- --ignored --test-threads=2 vm::systemd::
step "degradation story (a QEMU guest on the simulated SSD of tests/vm/ftl, about 4 minutes)"
cargo test "${FEATURES[@]}" --test it -- --ignored --test-threads=2 vm::degrade::
echo "== all tests passed"
