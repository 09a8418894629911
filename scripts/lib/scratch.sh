# Scratch directories of the image builds (sourced by scripts/build-*-image.sh). A build works
# in CACHE/NAME.XXXXXX and removes it on exit; a build that was killed (SIGKILL, or a removal
# that met a file system debootstrap still had mounted) leaves it behind, and the next build of
# that kind clears it, holding a lock so that it never clears the directory of a build running.

# scratch_remove DIR: unmount what is still mounted under DIR, deepest first, then remove DIR
# without crossing into any other file system.
scratch_remove() {
  local dir=$1 mnt
  [[ -e $dir ]] || return 0
  while read -r mnt; do
    umount -l "$mnt" 2>/dev/null || true
  done < <(awk -v d="$dir/" 'index($2, d) == 1 {print $2}' /proc/self/mounts | sort -r)
  rm -rf --one-file-system "$dir"
}

# scratch_lock CACHE NAME: wait for CACHE/NAME.lock and hold it until the script ends (one build
# of this kind at a time), then remove the scratch directories CACHE/NAME.* killed builds left.
scratch_lock() {
  local cache=$1 name=$2 dir fd
  exec {fd}>"$cache/$name.lock"
  flock "$fd"
  for dir in "$cache/$name".*; do
    [[ -d $dir ]] || continue
    echo "scratch: removing $dir, left by a build that was stopped" >&2
    scratch_remove "$dir"
  done
}
