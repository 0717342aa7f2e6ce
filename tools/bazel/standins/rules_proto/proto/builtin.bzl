"""Bazel's built-in ProtoInfo, under a name defs.bzl can export as ProtoInfo."""

builtin_proto_info = ProtoInfo
