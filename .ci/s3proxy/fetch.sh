#!/usr/bin/env bash
# Fetches s3proxy (org.gaul:s3proxy, its jar-with-dependencies: one jar,
# Java 11 or later) from Maven Central into a cache outside the clone and
# prints the jar's path. A second run finds it there and fetches nothing.
# The tests of the attachments.s3 store run against it (.ci/run starts it
# on 127.0.0.1 with a filesystem blob store).
#   YIDU_S3PROXY_CACHE  the cache folder (default ~/.cache/yidu)
set -euo pipefail
version=2.6.0
dir="${YIDU_S3PROXY_CACHE:-$HOME/.cache/yidu}/s3proxy-$version"
jar="$dir/s3proxy-$version-jar-with-dependencies.jar"
if [ ! -f "$dir/.complete" ]; then
	rm -rf "$dir" && mkdir -p "$dir"
	mvn -B -q dependency:copy -Dartifact="org.gaul:s3proxy:$version:jar:jar-with-dependencies" \
		-DoutputDirectory="$dir" >&2
	ls "$jar" >/dev/null
	touch "$dir/.complete"
fi
echo "$jar"
