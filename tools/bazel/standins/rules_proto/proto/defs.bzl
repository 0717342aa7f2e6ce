"""The rules of rules_proto that Bazel 4 has built in."""

load(":builtin.bzl", "builtin_proto_info")

ProtoInfo = builtin_proto_info
proto_lang_toolchain = native.proto_lang_toolchain
proto_library = native.proto_library
