# Condenses gdb's "thread apply all bt" output into one line per thread: its header, then
# the function of each frame, innermost first (libc's futex/pthread internals dropped).
function flush() { if (line != "") print substr(line, 1, 600); line = "" }
/^Thread [0-9]+ / {
  flush()
  match($0, /"[^"]*"/); name = substr($0, RSTART, RLENGTH)
  line = $1 " " $2 " " name ":"
  next
}
line != "" && /^#[0-9]+ / {
  f = $0
  sub(/^#[0-9]+ +(0x[0-9a-f]+ in )?/, "", f)
  sub(/ \(.*$/, "", f)
  if (f ~ /^(__futex|__GI___futex|__pthread_cond|___pthread_cond|__GI___|syscall|clone)/) next
  line = line " < " f
  next
}
/^$/ { flush() }
END { flush() }
