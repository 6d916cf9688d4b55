#!/usr/bin/env bash
# The blue-green route of docs/upgrades.md as one script: preview blue's
# vhosts against green (printed; what the spec declares is applied for
# green's release anyway, the rest is the operator's), apply the spec on
# the new (green) broker, for green's release, then move every message of
# the spec's queues from the old (blue) broker to green with
# `rmqtopo upgrade move`. It exits 0 only once every message of the spec's
# queues has left blue, confirmed on green, and blue's queues have stayed
# empty for QUIET (default 15s). Run it again after any failure or kill:
# both steps are idempotent, and the move's shovels run on green meanwhile.
#
# Environment: SPEC (a spec file), BLUE_URL, BLUE_AMQP_URL, GREEN_URL,
# GREEN_AMQP_URL (management and AMQP URLs; the AMQP URLs are also what
# green's shovels connect to, so green must reach them), RMQTOPO_USER and
# RMQTOPO_PASSWORD (a user of both brokers). Optional: RMQTOPO (the
# binary, default rmqtopo on PATH), QUIET. Green needs the rabbitmq_shovel
# plugin enabled (it runs the shovels); blue needs no plugin. The user
# needs the monitoring tag on blue (the preview reads channels and
# consumers) and may configure and write the spec's queues on both.
set -euo pipefail

for v in SPEC BLUE_URL BLUE_AMQP_URL GREEN_URL GREEN_AMQP_URL RMQTOPO_USER RMQTOPO_PASSWORD; do
	if [ -z "${!v:-}" ]; then
		echo "run.sh: $v is not set" >&2
		exit 2
	fi
done
export RMQTOPO_USER RMQTOPO_PASSWORD
rmqtopo=${RMQTOPO:-rmqtopo}

echo "run.sh: previewing blue against green" >&2
status=0
"$rmqtopo" upgrade preview "$SPEC" --url "$BLUE_URL" --target-url "$GREEN_URL" >&2 || status=$?
case $status in
0) ;;
8) echo "run.sh: green refuses some of what blue holds (error verdicts above): the spec's objects are applied for green's release below; fix the others before importing blue's definitions" >&2 ;;
*) echo "run.sh: the preview failed (exit $status); going on, the move does not depend on it" >&2 ;;
esac

echo "run.sh: applying $SPEC on green" >&2
"$rmqtopo" apply "$SPEC" --url "$GREEN_URL" --amqp-url "$GREEN_AMQP_URL" --auto-approve >&2

echo "run.sh: moving every message of $SPEC from blue to green" >&2
exec "$rmqtopo" upgrade move "$SPEC" \
	--blue-url "$BLUE_URL" --blue-amqp-url "$BLUE_AMQP_URL" \
	--green-url "$GREEN_URL" --green-amqp-url "$GREEN_AMQP_URL" \
	--quiet "${QUIET:-15s}"
