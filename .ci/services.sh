#!/usr/bin/env bash
# Installs and starts what the tests need on a fresh machine of the
# project's kind, which starts no server before a session: MariaDB and
# Redis from Debian, root let in over TCP with an empty password (Debian's
# root signs in by unix socket only), the `test` database; Debian's
# chromium and a CJK font for the browser tests; poppler-utils (pdftotext)
# and zbar-tools (zbarimg) for the evidence tests; openssl for the test TSA; maven for the jars. Safe to run again: what is there is kept.
# .ci/run sources it; a developer runs it once per machine.
set -euo pipefail

ci_wait_for() { # name, command...
	local name=$1; shift
	for _ in $(seq 1 90); do
		if "$@" >/dev/null 2>&1; then return 0; fi
		sleep 1
	done
	echo "ci: $name did not come up" >&2
	return 1
}

need=()
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server)
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
dpkg -s fonts-wqy-microhei >/dev/null 2>&1 || need+=(fonts-wqy-microhei)
command -v pdftotext >/dev/null 2>&1 || need+=(poppler-utils)
# zbarimg: an independent reader of the 告知确认书's QR code of its proof.
command -v zbarimg >/dev/null 2>&1 || need+=(zbar-tools)
# openssl: the test time-stamping authority (openssl ts -reply) and its
# independent check (openssl ts -verify) of the log's RFC 3161 tokens.
command -v openssl >/dev/null 2>&1 || need+=(openssl)
# java and mvn fetch and run Apache Kafka and s3proxy (.ci/kafka, .ci/s3proxy).
command -v mvn >/dev/null 2>&1 || need+=(maven)
if [ ${#need[@]} -gt 0 ]; then
	echo "ci: installing ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${need[@]}" >/dev/null
fi

# Redis: no persistence, loopback only.
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
	mkdir -p /var/lib/redis /var/log/redis
	redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
		--dir /var/lib/redis --logfile /var/log/redis/ci.log
fi
ci_wait_for redis redis-cli -h 127.0.0.1 -p 6379 ping

# MariaDB: the package initialises /var/lib/mysql; in a container its
# postinst may not start the server, so start it as the brief says.
mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
if ! mariadb-admin -uroot ping >/dev/null 2>&1; then
	start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql
fi
ci_wait_for "mariadb (socket)" mariadb-admin -uroot ping
# Root over TCP with an empty password, as the tests' default DSN
# root@tcp(127.0.0.1:3306)/ expects; the socket keeps working for root too.
if ! mariadb -h 127.0.0.1 -uroot -e 'SELECT 1' >/dev/null 2>&1; then
	mariadb -uroot <<'SQL'
ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket;
CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;
CREATE USER IF NOT EXISTS 'root'@'::1' IDENTIFIED BY '';
GRANT ALL PRIVILEGES ON *.* TO 'root'@'::1' WITH GRANT OPTION;
FLUSH PRIVILEGES;
SQL
fi
ci_wait_for "mariadb (tcp)" mariadb-admin -h 127.0.0.1 -uroot ping
mariadb -h 127.0.0.1 -uroot -e 'CREATE DATABASE IF NOT EXISTS test'
