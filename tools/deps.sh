# Sourced by main.sh and test.sh: makes sure the build tools are installed.
# Missing ones are installed with apt-get when running as root or with sudo;
# otherwise the one apt-get line needed is printed and the script stops.

# command -> Debian package
tfm_needed_packages() {
  local missing=()
  command -v cc >/dev/null 2>&1 || missing+=(build-essential)
  command -v cmake >/dev/null 2>&1 || missing+=(cmake)
  command -v ninja >/dev/null 2>&1 || missing+=(ninja-build)
  command -v flex >/dev/null 2>&1 || missing+=(flex)
  command -v bison >/dev/null 2>&1 || missing+=(bison)
  local llvm=""
  for c in llvm-config llvm-config-18 llvm-config-17 llvm-config-16 llvm-config-15 \
           llvm-config-14 /usr/lib/llvm-14/bin/llvm-config; do
    command -v "$c" >/dev/null 2>&1 && llvm=$c && break
  done
  [ -n "$llvm" ] || missing+=(llvm-14-dev)
  # The checkpoint test reads our files with the safetensors package (see test.sh).
  /usr/bin/python3 -c 'import ensurepip' >/dev/null 2>&1 || missing+=(python3-venv)
  /usr/bin/python3 -c 'import numpy' >/dev/null 2>&1 || missing+=(python3-numpy)
  # The runtime's tokenizers: Unicode categories, NFD and lower case from
  # utf8proc; SentencePiece models through libsentencepiece.
  [ -f /usr/include/utf8proc.h ] || missing+=(libutf8proc-dev)
  [ -f /usr/include/sentencepiece_processor.h ] || missing+=(libsentencepiece-dev)
  # Data-parallel training across processes (runtime/dist.h): Open MPI.
  command -v mpicc >/dev/null 2>&1 || missing+=(libopenmpi-dev)
  command -v mpirun >/dev/null 2>&1 || missing+=(openmpi-bin)
  printf '%s\n' "${missing[@]}"
}

tfm_install_deps() {
  local missing
  mapfile -t missing < <(tfm_needed_packages | sed '/^$/d')
  [ "${#missing[@]}" -eq 0 ] && return 0
  echo "tfm: installing missing packages: ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
      sudo="sudo"
    else
      echo "tfm: these packages are missing; install them with:" >&2
      echo "  sudo apt-get install -y ${missing[*]}" >&2
      exit 1
    fi
  fi
  if ! command -v apt-get >/dev/null 2>&1; then
    echo "tfm: apt-get not found; install these with your package manager: ${missing[*]}" >&2
    exit 1
  fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
}

# Programs only tests use: Neovim (the editor tests drive its LSP client
# and load the Vim syntax file). Installed like the build tools when
# possible; when not, those tests report themselves skipped.
tfm_install_test_tools() {
  # command -> Debian package: neovim (editor tests), chromium (the HTML
  # pages, opened headless), graphviz (tfmc emit dot rendered to SVG),
  # qemu-user (a --cpu generic-dispatch binary run on an emulated Haswell).
  local missing=()
  command -v nvim >/dev/null 2>&1 || missing+=(neovim)
  command -v chromium >/dev/null 2>&1 || missing+=(chromium)
  command -v dot >/dev/null 2>&1 || missing+=(graphviz)
  command -v qemu-x86_64 >/dev/null 2>&1 || missing+=(qemu-user)
  # Debian's PyTorch: the reference the pretrained-model tests compare with.
  /usr/bin/python3 -c 'import torch' >/dev/null 2>&1 || missing+=(python3-torch)
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null && sudo="sudo" ||
      { echo "tfm: ${missing[*]} not installed (sudo apt-get install ${missing[*]}); their tests will be skipped" >&2
        return 0; }
  fi
  command -v apt-get >/dev/null 2>&1 || return 0
  echo "tfm: installing ${missing[*]} for the editor, page and graph tests"
  { $sudo apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"; } \
    >/dev/null 2>&1 ||
    echo "tfm: could not install ${missing[*]}; their tests will be skipped" >&2
}

# The safetensors package, the format's reference reader (and the tokenizer
# tests' tokenizers and sentencepiece), in a virtual environment at $1 that also sees Debian's python3-numpy (and python3-torch,
# when installed): runtime.ckpt_python_safetensors reads our checkpoints with
# it. Prints the environment's python, or nothing when PyPI cannot be reached
# (that test then reports itself skipped).
tfm_python_with_safetensors() {
  local venv=$1
  if [ ! -x "$venv/bin/python" ]; then
    /usr/bin/python3 -m venv --system-site-packages "$venv" >&2 || return 0
  fi
  "$venv/bin/python" -c 'import safetensors' 2>/dev/null ||
    "$venv/bin/python" -m pip install -q --timeout 60 --disable-pip-version-check safetensors >&2 ||
    { echo "tfm: could not install the safetensors package; its checkpoint test will be skipped" >&2
      return 0; }
  # The tokenizer tests' references (tests/tokenizer): Hugging Face's
  # tokenizers, and sentencepiece of the 0.1 series that Debian's
  # libsentencepiece is (0.2 breaks ties between unigram segmentations
  # differently). A test whose package is missing reports itself skipped.
  "$venv/bin/python" -c 'import tokenizers' 2>/dev/null ||
    "$venv/bin/python" -m pip install -q --timeout 60 --disable-pip-version-check tokenizers >&2 ||
    echo "tfm: could not install the tokenizers package; its tokenizer tests will be skipped" >&2
  "$venv/bin/python" -c 'import sentencepiece as s; assert s.__version__.startswith("0.1.")' 2>/dev/null ||
    "$venv/bin/python" -m pip install -q --timeout 60 --disable-pip-version-check 'sentencepiece==0.1.99' >&2 ||
    echo "tfm: could not install the sentencepiece package; its tokenizer tests will be skipped" >&2
  echo "$venv/bin/python"
}

# transformers, the reference of the pretrained-model tests (tests/pretrained:
# Hugging Face checkpoints into models/gpt2.tfm and models/bert.tfm), in a
# virtual environment at $1 over Debian's python3-torch (1.13) and numpy:
# transformers 4.40 is the last series that supports that torch, and the
# system's numpy is pinned so that pip does not bring one torch was not
# built for. Prints its python, or nothing without torch or PyPI (those
# tests then report themselves skipped).
tfm_python_with_transformers() {
  local venv=$1 numpy
  /usr/bin/python3 -c 'import torch' 2>/dev/null || return 0
  numpy=$(/usr/bin/python3 -c 'import numpy; print(numpy.__version__)' 2>/dev/null) || return 0
  if [ ! -x "$venv/bin/python" ]; then
    /usr/bin/python3 -m venv --system-site-packages "$venv" >&2 || return 0
  fi
  "$venv/bin/python" -c 'import transformers, safetensors' 2>/dev/null ||
    "$venv/bin/python" -m pip install -q --timeout 60 --disable-pip-version-check \
      'transformers==4.40.2' "numpy==$numpy" >&2 ||
    { echo "tfm: could not install transformers; the pretrained-model tests will be skipped" >&2
      return 0; }
  echo "$venv/bin/python"
}

tfm_jobs() { nproc 2>/dev/null || echo 2; }
