#!/bin/sh
echo "bazel coverage is not supported in this workspace: use go test -cover" >&2
exit 1
