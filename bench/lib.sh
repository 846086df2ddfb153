# Shell helpers shared by the bench/ scripts (sourced, not run).

# wait_http_200 URL PID SECONDS: polls URL until it answers 200; fails when PID exits first
# or after SECONDS.
wait_http_200() {
  local url=$1 pid=$2 limit=$3 code i
  for ((i = 0; i < limit * 5; i++)); do
    kill -0 "$pid" 2>/dev/null || return 1
    code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url" || true)
    [[ $code == 200 ]] && return 0
    sleep 0.2
  done
  return 1
}
