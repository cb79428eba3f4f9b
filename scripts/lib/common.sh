# Shared by scripts/setup, scripts/test, scripts/bench and scripts/fuzz (sourced, not run).
#
#   ensure_packages PKG...   apt-get installs those not installed yet (apt-get update first)
#   phase NAME CMD...        runs CMD and prints "[<script>] NAME: 12.3 s"
#   configure_build OPTS...  configures $build (Ninja, Release, ccache when present)
#   launcher_args            the -DCMAKE_*_COMPILER_LAUNCHER flags (ccache) or nothing

genscope_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build="${GENSCOPE_BUILD_DIR:-$genscope_root/build}"
script_name=$(basename "$0")
# ccache keys on paths relative to the checkout, so another clone of the same sources (CI's)
# finds the objects this one compiled.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$genscope_root}"

# What building and running genscope needs (library, CLI, demo, Python package).
runtime_packages=(
  cmake ninja-build g++ make pkg-config ccache
  nlohmann-json3-dev libfmt-dev libcli11-dev libsqlite3-dev sqlite3 libhwy-dev libxxhash-dev
  libcpp-httplib-dev libre2-dev
  libopenblas-openmp-dev
  libtorch-dev
  pybind11-dev python3-dev python3-numpy python3-torch python3-tqdm
  python3-pybind11 python3-setuptools python3-wheel python3-venv python3-pip
  procps util-linux
)
# What only the tests and benchmarks need on top: GoogleTest/Benchmark, real
# Prometheus/Pushgateway, headless Chromium, aiohttp (the ComfyUI package's routes and the
# message-clock server of its tests), clang's libFuzzer, the peers' tools.
# Every Debian package a script installs is in one of these *_packages arrays; the suite
# checks that the tests use nothing else a fresh machine lacks (tests/machine/check_packages.py).
test_packages=(
  libgtest-dev libgmock-dev libbenchmark-dev
  prometheus prometheus-pushgateway python3-prometheus-client chromium
  python3-aiohttp
  clang-14 libclang-rt-14-dev
  curl xz-utils
)
# scripts/fuzz: clang's libFuzzer with its sanitizer runtimes, and the omp.h clang compiles
# -fopenmp=libgomp code with (libomp-14-dev; gcc's is in gcc's own include folder).
fuzz_packages=(clang-14 libclang-rt-14-dev libomp-14-dev)

ensure_packages() {
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends \
    "${missing[@]}"
}

phase() {
  local name=$1 start end
  shift
  start=$(date +%s.%N)
  "$@"
  end=$(date +%s.%N)
  awk -v s="$script_name" -v n="$name" -v a="$start" -v b="$end" \
    'BEGIN { printf "[%s] %s: %.1f s\n", s, n, b - a }'
}

launcher_args() {
  if command -v ccache > /dev/null; then
    echo "-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache"
  fi
}

# configure_build -DGENSCOPE_BUILD_TESTS=ON ...: (re)configures $build with these options.
# Options toggle parts of one build folder, so setup, test and bench share its objects.
configure_build() {
  mkdir -p "$build"
  # shellcheck disable=SC2046
  cmake -S "$genscope_root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DPython3_EXECUTABLE=/usr/bin/python3 $(launcher_args) "$@" > "$build/configure.log" 2>&1 ||
    { cat "$build/configure.log"; return 1; }
  grep -E '^-- +(build type|tests|benchmarks|LibTorch|Python binding):' "$build/configure.log" || true
}
