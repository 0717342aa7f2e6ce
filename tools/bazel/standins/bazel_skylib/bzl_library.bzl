"""bzl_library: a set of .bzl files, for documentation tools (none here)."""

StarlarkLibraryInfo = provider(fields = ["srcs", "transitive_srcs"])

def _bzl_library_impl(ctx):
    deps = [dep[StarlarkLibraryInfo].transitive_srcs for dep in ctx.attr.deps if StarlarkLibraryInfo in dep]
    all_files = depset(ctx.files.srcs, transitive = deps)
    return [
        DefaultInfo(files = all_files),
        StarlarkLibraryInfo(srcs = ctx.files.srcs, transitive_srcs = all_files),
    ]

bzl_library = rule(
    implementation = _bzl_library_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".bzl", ".scl"]),
        "deps": attr.label_list(),
    },
)
