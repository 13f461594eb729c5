#!/usr/bin/env bash
# Fetches Apache Kafka's broker jars from Maven Central (pom.xml beside
# this file) into a cache outside the clone and prints the folder of jars.
# A second run finds them there and fetches nothing.
#   YIDU_KAFKA_CACHE  the cache folder (default ~/.cache/yidu)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=$(sed -n 's:.*<kafka.version>\(.*\)</kafka.version>.*:\1:p' "$here/pom.xml")
libs="${YIDU_KAFKA_CACHE:-$HOME/.cache/yidu}/kafka-$version/libs"
if [ ! -f "$libs/.complete" ]; then
	rm -rf "$libs" && mkdir -p "$libs"
	mvn -B -q -f "$here/pom.xml" dependency:copy-dependencies \
		-DincludeScope=runtime -DoutputDirectory="$libs" >&2
	ls "$libs"/kafka_2.13-"$version".jar >/dev/null
	touch "$libs/.complete"
fi
echo "$libs"
