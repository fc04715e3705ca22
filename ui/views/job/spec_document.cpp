// Reading and writing a spec document's fields by path, and the text the form shows for a value.
#include "views/job/spec_document.h"

#include <QStringList>
#include <algorithm>
#include <limits>

#include "spec/job_spec.h"

namespace ringmaster::ui {

namespace {

std::vector<std::string> splitPath(const std::string& path) {
  std::vector<std::string> keys;
  size_t start = 0;
  for (size_t dot; (dot = path.find('.', start)) != std::string::npos; start = dot + 1)
    keys.push_back(path.substr(start, dot - start));
  keys.push_back(path.substr(start));
  return keys;
}

// Where a key at this object path ("" for the top, "launch.hosts[]" inside a host) comes in the
// spec's description: the index of the first field under it (past every field when none is).
size_t describedPlace(const std::string& object_path, const std::string& key) {
  const std::string path = object_path.empty() ? key : object_path + "." + key;
  const std::vector<SpecField>& fields = specFields();
  for (size_t i = 0; i < fields.size(); ++i) {
    const std::string& field = fields[i].path;
    if (field == path ||
        (field.starts_with(path) && (field[path.size()] == '.' || field[path.size()] == '[')))
      return i;
  }
  return std::numeric_limits<size_t>::max();
}

nlohmann::ordered_json ordered(const nlohmann::json& value, const nlohmann::ordered_json& order,
                               const std::string& path) {
  if (value.is_array()) {
    nlohmann::ordered_json list = nlohmann::ordered_json::array();
    for (size_t i = 0; i < value.size(); ++i)
      list.push_back(ordered(value[i], order.is_array() && i < order.size() ? order[i] : nullptr,
                             path + "[]"));
    return list;
  }
  if (!value.is_object()) return nlohmann::ordered_json(value);
  std::vector<std::string> keys;
  if (order.is_object())
    for (const auto& [key, unused] : order.items())
      if (value.contains(key)) keys.push_back(key);
  std::vector<std::string> added;
  for (const auto& [key, unused] : value.items())
    if (std::find(keys.begin(), keys.end(), key) == keys.end()) added.push_back(key);
  std::stable_sort(added.begin(), added.end(), [&](const std::string& a, const std::string& b) {
    return describedPlace(path, a) < describedPlace(path, b);
  });
  keys.insert(keys.end(), added.begin(), added.end());
  nlohmann::ordered_json object = nlohmann::ordered_json::object();
  for (const std::string& key : keys) {
    const bool placed = order.is_object() && order.contains(key);
    object[key] = ordered(value.at(key), placed ? order.at(key) : nlohmann::ordered_json(),
                          path.empty() ? key : path + "." + key);
  }
  return object;
}

}  // namespace

nlohmann::ordered_json inKeyOrder(const nlohmann::json& document,
                                  const nlohmann::ordered_json& order) {
  return ordered(document, order, "");
}

const nlohmann::json* getPath(const nlohmann::json& doc, const std::string& path) {
  const nlohmann::json* node = &doc;
  for (const auto& key : splitPath(path)) {
    if (!node->is_object() || !node->contains(key)) return nullptr;
    node = &(*node)[key];
  }
  return node;
}

void setPath(nlohmann::json& doc, const std::string& path, std::optional<nlohmann::json> value) {
  const auto keys = splitPath(path);
  if (!value) {
    // Walked without creating anything: erasing a field that is not there changes nothing.
    std::vector<nlohmann::json*> chain = {&doc};  // chain[i + 1] is the object at keys[i]
    for (size_t i = 0; i + 1 < keys.size(); ++i) {
      nlohmann::json* node = chain.back();
      if (!node->is_object() || !node->contains(keys[i])) return;
      chain.push_back(&(*node)[keys[i]]);
    }
    if (!chain.back()->is_object()) return;
    chain.back()->erase(keys.back());
    // Objects left empty go too: an optional section (checkpoint with no dir), a nested block
    // (train.loss_scale once precision is no longer fp16).
    for (size_t i = keys.size() - 1; i-- > 0;) {
      if (!chain[i + 1]->empty()) break;
      chain[i]->erase(keys[i]);
    }
    return;
  }
  nlohmann::json* node = &doc;
  for (size_t i = 0; i + 1 < keys.size(); ++i) {
    if (!node->is_object()) *node = nlohmann::json::object();
    node = &(*node)[keys[i]];
  }
  if (!node->is_object()) *node = nlohmann::json::object();
  (*node)[keys.back()] = std::move(*value);
}

// A typed value from text: JSON when it parses as a number, true / false or a list, else a string
// (so the parser, not the form, says what is wrong with "abc" in a number field).
nlohmann::json valueFromText(const QString& text) {
  const std::string s = text.trimmed().toStdString();
  auto parsed = nlohmann::json::parse(s, nullptr, false);
  if (!parsed.is_discarded() && (parsed.is_number() || parsed.is_boolean())) return parsed;
  return s;
}

QString textOf(const nlohmann::json& value) {
  if (value.is_string()) return QString::fromStdString(value.get<std::string>());
  if (value.is_array()) {
    QStringList parts;
    for (const auto& v : value) parts << textOf(v);
    return parts.join(", ");
  }
  return QString::fromStdString(value.dump());
}

bool isList(FieldType type) {
  return type == FieldType::kIntegerList || type == FieldType::kNumberList;
}

// A text list (program.args) as the form shows it, one item per line; nullopt when the lines
// cannot give it back (not a list of strings, an item with a line break, a last item empty).
static std::optional<QString> linesOf(const nlohmann::json& value) {
  if (!value.is_array()) return std::nullopt;
  QStringList lines;
  for (const auto& item : value) {
    if (!item.is_string()) return std::nullopt;
    const QString line = QString::fromStdString(item.get<std::string>());
    if (line.contains('\n') || line.contains('\r')) return std::nullopt;
    lines << line;
  }
  if (!lines.isEmpty() && lines.back().isEmpty()) return std::nullopt;
  return lines.join('\n');
}

// A text map (launch.env) as the form shows it, one NAME=VALUE per line (a name without a value,
// null, as NAME alone); nullopt when the lines cannot give it back (not an object, a name with
// '=' or a line break, a value that is not a string or holds a line break).
static std::optional<QString> mapLinesOf(const nlohmann::json& value) {
  if (!value.is_object()) return std::nullopt;
  QStringList lines;
  for (const auto& [name, item] : value.items()) {
    const QString key = QString::fromStdString(name);
    if (key.isEmpty() || key.contains('=') || key.contains('\n') || key.contains('\r'))
      return std::nullopt;
    if (item.is_null()) {
      lines << key;
      continue;
    }
    if (!item.is_string()) return std::nullopt;
    const QString text = QString::fromStdString(item.get<std::string>());
    if (text.contains('\n') || text.contains('\r')) return std::nullopt;
    lines << key + "=" + text;
  }
  return lines.join('\n');
}

// The object NAME=VALUE lines give (blank lines skipped; a line without '=' is its name with a
// null value, which the parser then calls not a string, next to the field).
nlohmann::json mapOfLines(const QString& text) {
  nlohmann::json map = nlohmann::json::object();
  for (const QString& line : text.split('\n')) {
    if (line.trimmed().isEmpty()) continue;
    const qsizetype equals = line.indexOf('=');
    if (equals < 0)
      map[line.toStdString()] = nullptr;
    else
      map[line.left(equals).toStdString()] = line.mid(equals + 1).toStdString();
  }
  return map;
}

// The lines of a text list or a text map as the form shows them.
std::optional<QString> editorLinesOf(FieldType type, const nlohmann::json& value) {
  return type == FieldType::kTextMap ? mapLinesOf(value) : linesOf(value);
}

// The strategy kind a program job is recorded with when it names none: the parser's rule (ddp on
// several ranks, single on one), from the document's hosts (or its Slurm allocation).
std::string programStrategyKind(const nlohmann::json& document) {
  int64_t ranks = 0;
  if (const nlohmann::json* slurm = getPath(document, "launch.scheduler");
      slurm && slurm->is_object()) {
    // A Slurm job's world: nodes × ranks_per_node (each 1 when left out).
    ranks = 1;
    for (const char* key : {"nodes", "ranks_per_node"})
      if (slurm->contains(key) && (*slurm)[key].is_number_integer())
        ranks *= (*slurm)[key].get<int64_t>();
    return ranks > 1 ? "ddp" : "single";
  }
  const nlohmann::json* hosts = getPath(document, "launch.hosts");
  if (!hosts) return "single";  // the default hosts: localhost, one rank
  if (hosts->is_array())
    for (const auto& host : *hosts)
      if (host.is_object() && host.contains("ranks") && host["ranks"].is_number_integer())
        ranks += host["ranks"].get<int64_t>();
  return ranks > 1 ? "ddp" : "single";
}

std::string programStrategyKindOf(const nlohmann::json& document) {
  if (const nlohmann::json* kind = getPath(document, "strategy.kind"); kind && kind->is_string())
    return kind->get<std::string>();
  const SpecParseResult parsed = parseJobSpec(document);
  if (parsed.ok()) {
    const std::string label = strategyLabel(*parsed.spec);
    const std::vector<std::string>& kinds = findSpecField("strategy.kind")->choices;
    if (std::find(kinds.begin(), kinds.end(), label) != kinds.end()) return label;
  }
  return programStrategyKind(document);
}

bool isMeshForm(const nlohmann::json& strategy) {
  if (!strategy.is_object()) return false;
  for (const char* key : {"mesh", "dp", "tp", "pp"})
    if (strategy.contains(key)) return true;
  return false;
}

}  // namespace ringmaster::ui
