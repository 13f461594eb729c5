#!/usr/bin/env bash
# Starts s3proxy (the jar .ci/s3proxy/fetch.sh prints) on 127.0.0.1 with a
# filesystem blob store under DIR and the test keys, and waits until it
# answers. Prints its PID on the first line and its endpoint (host:port)
# on the second; the caller kills the PID.
#   start.sh JAR DIR [PORT]
set -euo pipefail
jar=$1 dir=$2 port=${3:-0}
if [ "$port" = 0 ]; then
	# A free port: bind one, let it go (s3proxy takes no :0).
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
fi
mkdir -p "$dir/blobs"
cat >"$dir/s3proxy.conf" <<CONF
s3proxy.endpoint=http://127.0.0.1:$port
s3proxy.authorization=aws-v2-or-v4
s3proxy.identity=${YIDU_TEST_S3_ACCESS_KEY:-yidutest}
s3proxy.credential=${YIDU_TEST_S3_SECRET_KEY:-yidutestsecret}
s3proxy.cors-allow-all=true
jclouds.provider=filesystem
jclouds.filesystem.basedir=$dir/blobs
CONF
java -jar "$jar" --properties "$dir/s3proxy.conf" >"$dir/s3proxy.log" 2>&1 &
pid=$!
for _ in $(seq 1 120); do
	# Any HTTP answer (403 without a signature) is a server up.
	if curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/" 2>/dev/null | grep -q '^[1-5]'; then
		echo "$pid"
		echo "127.0.0.1:$port"
		exit 0
	fi
	if ! kill -0 "$pid" 2>/dev/null; then cat "$dir/s3proxy.log" >&2; echo "s3proxy did not start" >&2; exit 1; fi
	sleep 0.5
done
cat "$dir/s3proxy.log" >&2
kill "$pid" 2>/dev/null || true
echo "s3proxy did not answer in 60 s" >&2
exit 1
