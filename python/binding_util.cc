#include "python/binding_util.h"

#include <pybind11/stl.h>
#include <toml++/toml.h>

#include <cmath>
#include <memory>

namespace moesim::python {
namespace {

toml::table to_table(const py::dict& d, const std::string& name, const std::string& prefix);

// A Python str as UTF-8; ConfigError naming `name` and the key path for one that is not valid
// Unicode (a lone surrogate).
std::string utf8(const py::handle& v, const std::string& name, const std::string& key_path) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(v.ptr(), &size);
  if (data == nullptr) {
    PyErr_Clear();
    throw sim::ConfigError(name, 0, 0, key_path, "a string that is not valid Unicode text");
  }
  return std::string(data, static_cast<size_t>(size));
}

// A Python value of a scenario dict as a TOML node; ConfigError naming `name` and the key path
// for anything TOML cannot hold (None, sets, objects, integers beyond 64 bits, NaN and
// infinities: a scenario's numbers are finite).
std::unique_ptr<toml::node> to_node(const py::handle& v, const std::string& name,
                                    const std::string& key_path) {
  if (py::isinstance<py::bool_>(v)) return std::make_unique<toml::value<bool>>(v.cast<bool>());
  if (py::isinstance<py::int_>(v)) {
    int overflow = 0;
    const long long i = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
    if (overflow != 0) {
      throw sim::ConfigError(name, 0, 0, key_path,
                             py::repr(v).cast<std::string>() +
                                 " is beyond the 64-bit integer range [-2^63, 2^63 - 1]");
    }
    return std::make_unique<toml::value<int64_t>>(static_cast<int64_t>(i));
  }
  if (py::isinstance<py::float_>(v)) {
    const double d = v.cast<double>();
    if (!std::isfinite(d)) {
      throw sim::ConfigError(name, 0, 0, key_path,
                             py::repr(v).cast<std::string>() + " is not a finite number");
    }
    return std::make_unique<toml::value<double>>(d);
  }
  if (py::isinstance<py::str>(v)) {
    return std::make_unique<toml::value<std::string>>(utf8(v, name, key_path));
  }
  if (py::isinstance<py::dict>(v)) {
    return std::make_unique<toml::table>(to_table(v.cast<py::dict>(), name, key_path));
  }
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    auto arr = std::make_unique<toml::array>();
    size_t i = 0;
    for (const py::handle& item : v) {
      std::unique_ptr<toml::node> n =
          to_node(item, name, key_path + "[" + std::to_string(i++) + "]");
      n->visit([&](auto&& node) { arr->push_back(std::move(node)); });
    }
    return arr;
  }
  throw sim::ConfigError(name, 0, 0, key_path,
                         "a " + py::str(py::type::of(v).attr("__name__")).cast<std::string>() +
                             " cannot be a TOML value (int, float, bool, str, list, dict)");
}

toml::table to_table(const py::dict& d, const std::string& name, const std::string& prefix) {
  toml::table t;
  for (const auto& [k, v] : d) {
    if (!py::isinstance<py::str>(k)) {
      throw sim::ConfigError(name, 0, 0, prefix,
                             "a key that is not a string: " + py::repr(k).cast<std::string>());
    }
    const std::string key = utf8(k, name, prefix);
    std::unique_ptr<toml::node> n = to_node(v, name, prefix.empty() ? key : prefix + "." + key);
    n->visit([&](auto&& node) { t.insert_or_assign(key, std::move(node)); });
  }
  return t;
}

}  // namespace

void raise(const Failure& failure) {
  py::module_ errors = py::module_::import("moesim.errors");
  const char* cls = failure.kind == Failure::kConfig  ? "ConfigError"
                    : failure.kind == Failure::kUsage ? "UsageError"
                                                      : "OutputError";
  py::object exc = errors.attr(cls)(failure.message, failure.file, failure.key_path, failure.reason,
                                    failure.line, failure.column);
  PyErr_SetObject(exc.get_type().ptr(), exc.ptr());
  throw py::error_already_set();
}

py::object to_python(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return py::none();
    case nlohmann::json::value_t::boolean:
      return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return py::int_(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float: {
      const double v = j.get<double>();
      return std::isfinite(v) ? py::object(py::float_(v)) : py::object(py::none());
    }
    case nlohmann::json::value_t::string:
      return py::str(j.get_ref<const std::string&>());
    case nlohmann::json::value_t::array: {
      py::list out;
      for (const auto& item : j) out.append(to_python(item));
      return std::move(out);
    }
    case nlohmann::json::value_t::object: {
      py::dict out;
      for (const auto& [k, v] : j.items()) out[py::str(k)] = to_python(v);
      return std::move(out);
    }
    default:
      return py::none();
  }
}

api::ScenarioSource scenario_source(const py::object& scenario, const Strings& overrides,
                                    const Strings& dropped, const std::string& name,
                                    const std::string& base_dir) {
  api::ScenarioSource source;
  source.dropped = dropped;
  if (py::isinstance<py::dict>(scenario)) {
    std::optional<toml::table> table;
    try {
      table.emplace(to_table(scenario.cast<py::dict>(), name, ""));
    } catch (const sim::ConfigError& e) {
      raise({Failure::kConfig, e.file(), e.key_path(), e.reason(), e.what(), e.line(), e.column()});
    }
    source.held = std::make_shared<const sim::study::ScenarioTemplate>(
        sim::study::ScenarioTemplate::from_table(std::move(*table), name, base_dir));
  } else {
    source.path = py::str(scenario).cast<std::string>();
  }
  call([&] {
    for (const std::string& text : overrides) {
      source.overrides.push_back(sim::study::parse_override(text, "--set"));
    }
    return 0;
  });
  return source;
}

}  // namespace moesim::python
