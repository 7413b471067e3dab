# The common start of the MPI command-line tests, sourced as
#   source "$(dirname "${BASH_SOURCE[0]}")/cli_test_prologue.sh" "$@"   # ZEROLAP_BINARY WORK_DIR
# It sets $zerolap and a fresh, empty $work, lets Open MPI run as root, gives the mpirun flags every
# such test uses in $flags (a test may append its own) and fail(), which prints FAIL and exits 1.
set -u
zerolap=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
flags="--oversubscribe --bind-to none"
fail() { echo "FAIL: $*"; exit 1; }
