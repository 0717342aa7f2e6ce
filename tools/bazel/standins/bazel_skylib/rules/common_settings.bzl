"""The build settings of skylib's common_settings that rules_go uses."""

BuildSettingInfo = provider(
    doc = "The value of a build setting.",
    fields = ["value"],
)

def _impl(ctx):
    return BuildSettingInfo(value = ctx.build_setting_value)

bool_flag = rule(implementation = _impl, build_setting = config.bool(flag = True))
bool_setting = rule(implementation = _impl, build_setting = config.bool())
int_flag = rule(implementation = _impl, build_setting = config.int(flag = True))
int_setting = rule(implementation = _impl, build_setting = config.int())
string_list_flag = rule(implementation = _impl, build_setting = config.string_list(flag = True))
string_list_setting = rule(implementation = _impl, build_setting = config.string_list())

def _string_impl(ctx):
    value = ctx.build_setting_value
    if ctx.attr.values and value not in ctx.attr.values:
        fail("Error setting %s: invalid value '%s'. Allowed values are %s" % (
            ctx.label,
            value,
            ctx.attr.values,
        ))
    return BuildSettingInfo(value = value)

string_flag = rule(
    implementation = _string_impl,
    build_setting = config.string(flag = True),
    attrs = {"values": attr.string_list()},
)
string_setting = rule(
    implementation = _string_impl,
    build_setting = config.string(),
    attrs = {"values": attr.string_list()},
)
