#include "ir/Tasks.h"

#include "ir/Cluster.h"
#include "ir/Diagnostics.h"
#include "ir/InputFile.h"
#include "ir/JsonFields.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cstdlib>
#include <map>

namespace graphc {

namespace {

/// More tasks than any cluster we plan for; bounds what a file can ask for.
constexpr unsigned kMaxTasks = 4096;

constexpr TaskRole kRoles[] = {TaskRole::Chief, TaskRole::Worker, TaskRole::Ps};

std::optional<TaskRole> parseRole(llvm::StringRef s) {
  for (TaskRole r : kRoles)
    if (taskRoleName(r) == s)
      return r;
  return std::nullopt;
}

bool isTraining(TaskRole r) {
  return r != TaskRole::Ps;
}

std::string entryName(const Task &t) {
  return taskRoleName(t.role).str() + "[" + std::to_string(t.index) + "]";
}

} // namespace

llvm::StringRef taskRoleName(TaskRole r) {
  switch (r) {
  case TaskRole::Chief:
    return "chief";
  case TaskRole::Worker:
    return "worker";
  case TaskRole::Ps:
    return "ps";
  }
  llvm_unreachable("a task role");
}

TaskCluster TaskCluster::uniform(unsigned workers, unsigned ps, unsigned gpus) {
  assert(workers >= 1 && "a cluster trains on at least one worker");
  std::vector<Task> tasks;
  for (unsigned w = 0; w < workers; ++w)
    tasks.push_back({TaskRole::Worker, w, "localhost", gpus});
  for (unsigned p = 0; p < ps; ++p)
    tasks.push_back({TaskRole::Ps, p, "localhost", 0});
  auto c = create(std::move(tasks));
  assert(c && "a uniform cluster is valid");
  return std::move(*c);
}

llvm::Expected<TaskCluster> TaskCluster::create(std::vector<Task> tasks) {
  if (tasks.size() > kMaxTasks)
    return makeError("the cluster lists " + llvm::Twine(tasks.size()) + " tasks; at most " +
                     llvm::Twine(kMaxTasks) + " are planned");
  llvm::stable_sort(tasks, [](const Task &a, const Task &b) {
    return std::make_pair(a.role, a.index) < std::make_pair(b.role, b.index);
  });
  std::map<TaskRole, unsigned> perRole;
  for (const Task &t : tasks) {
    if (t.index != perRole[t.role]++)
      return makeError(entryName(t) + ": the tasks of a role are numbered 0, 1, ... once each");
    if (t.host.empty() || llvm::any_of(t.host, [](char c) { return c <= ' ' || c > '~'; }))
      return makeError(entryName(t) + ": host '" + printable(t.host) +
                       "' must be a host name or address (no spaces or control characters)");
    if (t.role == TaskRole::Ps && t.gpus)
      return makeError(entryName(t) + ": a ps task holds variables on its host; 'gpus' is for "
                                      "chief and worker tasks");
    if (t.gpus >= Cluster::kMaxDevices)
      return makeError(entryName(t) + ": " + llvm::Twine(t.gpus) + " GPUs; a task has at most " +
                       llvm::Twine(Cluster::kMaxDevices - 1));
  }
  if (perRole[TaskRole::Chief] > 1)
    return makeError("the cluster lists " + llvm::Twine(perRole[TaskRole::Chief]) +
                     " chief tasks; it has at most one (without one, worker 0 is the chief)");
  TaskCluster c;
  c.workers_ = perRole[TaskRole::Chief] + perRole[TaskRole::Worker];
  if (c.workers_ == 0)
    return makeError("the cluster has no chief or worker task to train");
  // Every training task with GPUs, or none: a plan's towers are all on GPUs
  // or all on hosts.
  auto withGpus = llvm::find_if(tasks, [](const Task &t) { return t.gpus > 0; });
  auto without = llvm::find_if(tasks, [](const Task &t) { return isTraining(t.role) && !t.gpus; });
  if (withGpus != tasks.end() && without != tasks.end())
    return makeError(entryName(*without) + " has no GPU but " + entryName(*withGpus) + " has " +
                     llvm::Twine(withGpus->gpus) +
                     ": give every chief and worker task GPUs (\"gpus\", or --gpus for those "
                     "without), or none (one tower on its host)");
  c.tasks_ = std::move(tasks);
  return c;
}

std::vector<unsigned> TaskCluster::workerGpus() const {
  std::vector<unsigned> gpus;
  for (unsigned r = 0; r < workers_; ++r)
    gpus.push_back(tasks_[r].gpus);
  return gpus;
}

std::string TaskCluster::describe(unsigned rank) const {
  const Task &t = tasks_[rank];
  std::string s = taskRoleName(t.role).str();
  if (t.role != TaskRole::Chief)
    s += " " + std::to_string(t.index);
  if (rank == 0 && t.role != TaskRole::Chief)
    s += " (the chief)";
  return s + " on " + t.host;
}

namespace {

/// "node1:2222" -> "node1", "[::1]:2222" -> "[::1]"; a host without a port
/// stays whole. A port is a whole number from 0 to 65535: "node1:NaN" is
/// refused rather than read as a host named so.
llvm::Expected<std::string> hostOf(llvm::StringRef address, const std::string &where) {
  size_t colon = address.rfind(':');
  if (colon == llvm::StringRef::npos || (address.startswith("[") && address.endswith("]")))
    return address.str();
  llvm::StringRef host = address.take_front(colon), port = address.drop_front(colon + 1);
  unsigned number = 0;
  if (host.empty() || port.empty() || !llvm::all_of(port, llvm::isDigit) ||
      port.getAsInteger(10, number) || number > 65535)
    return makeError(where + ": address '" + printable(address) +
                     "' must be \"host:port\" with a port from 0 to 65535");
  return host.str();
}

llvm::Expected<Task> parseEntry(const llvm::json::Value &v, TaskRole role, unsigned index,
                                const std::string &where, unsigned defaultGpus) {
  Task t{role, index, "", isTraining(role) ? defaultGpus : 0};
  if (auto address = v.getAsString()) {
    if (auto e = into(hostOf(*address, where), t.host))
      return e;
    return t;
  }
  const llvm::json::Object *o = v.getAsObject();
  if (!o)
    return makeError(where + " must be an address \"host:port\" or an object {\"host\": ..." +
                     (isTraining(role) ? ", \"gpus\": ...}" : "}"));
  JsonFields f(*o, where);
  if (role == TaskRole::Ps && o->get("gpus"))
    return makeError(where + ": a ps task holds variables on its host; 'gpus' is for chief and "
                             "worker tasks");
  if (auto e = f.unknownKeys(isTraining(role) ? llvm::ArrayRef<llvm::StringRef>{"gpus", "host"}
                                              : llvm::ArrayRef<llvm::StringRef>{"host"}))
    return e;
  if (auto e = into(f.string("host"), t.host))
    return e;
  if (o->get("gpus"))
    if (auto e = into(f.count("gpus", Cluster::kMaxDevices), t.gpus))
      return e;
  return t;
}

/// The role lists of `cluster`; `prefix` names it in errors ("" or "cluster.").
llvm::Expected<std::vector<Task>> parseRoles(const llvm::json::Object &cluster,
                                             const std::string &prefix, unsigned defaultGpus) {
  std::vector<std::string> keys;
  for (const auto &kv : cluster)
    keys.push_back(kv.first.str());
  llvm::sort(keys);
  std::vector<Task> tasks;
  for (const std::string &key : keys) {
    auto role = parseRole(key);
    if (!role)
      return makeError(
          prefix + printable(key) + ": role '" + printable(key) +
          "' is not one of chief, worker, ps" +
          (key == "evaluator" ? " (graphrun's chief evaluates after every epoch)" : ""));
    const llvm::json::Array *list = cluster.get(key)->getAsArray();
    if (!list)
      return makeError(prefix + key + " must be a list of tasks");
    if (list->size() > kMaxTasks)
      return makeError(prefix + key + " lists " + llvm::Twine(list->size()) + " tasks; at most " +
                       llvm::Twine(kMaxTasks) + " are planned");
    for (unsigned i = 0; i < list->size(); ++i) {
      auto t = parseEntry((*list)[i], *role, i, prefix + key + "[" + std::to_string(i) + "]",
                          defaultGpus);
      if (!t)
        return t.takeError();
      tasks.push_back(std::move(*t));
    }
  }
  return tasks;
}

/// TF_CONFIG's "task": it must name a task of the cluster.
llvm::Error checkTask(const llvm::json::Object &task, const TaskCluster &c) {
  JsonFields f(task, "task");
  if (auto e = f.unknownKeys({"index", "type"}))
    return e;
  std::string type;
  unsigned index = 0;
  if (auto e = into(f.string("type"), type))
    return e;
  if (auto e = into(f.count("index", kMaxTasks), index))
    return e;
  auto role = parseRole(type);
  if (!role)
    return makeError("task: type '" + printable(type) + "' is not one of chief, worker, ps");
  unsigned listed = llvm::count_if(c.tasks(), [&](const Task &t) { return t.role == *role; });
  if (index >= listed)
    return makeError("task: " + type + " " + llvm::Twine(index) + " is not in the cluster (" +
                     llvm::Twine(listed) + " " + type + " task" + (listed == 1 ? "" : "s") + ")");
  return llvm::Error::success();
}

llvm::Expected<TaskCluster> parseTasks(llvm::StringRef text, unsigned defaultGpus) {
  // TF_CONFIG nests 4 deep: the root, "cluster", a role's list, an entry.
  auto root = parseBoundedJson(text, "the cluster of tasks", "a cluster of tasks", 4);
  if (!root)
    return root.takeError();
  const llvm::json::Object *o = root->getAsObject();
  if (!o)
    return makeError("a cluster of tasks is one JSON object: {\"worker\": [...], ...} or "
                     "TF_CONFIG's {\"cluster\": {...}, \"task\": {...}}");
  // TF_CONFIG: the roles under "cluster"; a cluster file: the roles themselves.
  const llvm::json::Object *roles = o, *task = nullptr;
  std::string prefix;
  if (o->get("cluster")) {
    JsonFields f(*o, "TF_CONFIG");
    if (auto e = f.unknownKeys({"cluster", "task"}))
      return e;
    if (auto e = into(f.object("cluster"), roles))
      return e;
    if (o->get("task"))
      if (auto e = into(f.object("task"), task))
        return e;
    prefix = "cluster.";
  }
  auto tasks = parseRoles(*roles, prefix, defaultGpus);
  if (!tasks)
    return tasks.takeError();
  auto c = TaskCluster::create(std::move(*tasks));
  if (!c)
    return c.takeError();
  if (task)
    if (auto e = checkTask(*task, *c))
      return e;
  return c;
}

} // namespace

llvm::Expected<TaskCluster> parseTasksJson(llvm::StringRef text, unsigned defaultGpus) {
  auto c = parseTasks(text, defaultGpus);
  if (!c)
    return oneLine(c.takeError());
  return c;
}

llvm::Expected<TaskCluster> loadTasksFile(llvm::StringRef path, unsigned defaultGpus) {
  auto buffer = readInputFile(path, "the cluster of tasks");
  if (!buffer)
    return buffer.takeError();
  auto c = parseTasksJson((*buffer)->getBuffer(), defaultGpus);
  if (!c)
    return withContext(c.takeError(), path);
  return c;
}

llvm::Expected<std::optional<TaskCluster>> tasksFromEnvironment(unsigned defaultGpus) {
  const char *config = std::getenv("TF_CONFIG");
  if (!config || !*config)
    return std::nullopt;
  auto c = parseTasksJson(config, defaultGpus);
  if (!c)
    return withContext(c.takeError(), "TF_CONFIG");
  return std::optional<TaskCluster>(std::move(*c));
}

std::string tasksToJson(const TaskCluster &c) {
  llvm::json::Object roles;
  for (TaskRole role : kRoles) {
    llvm::json::Array list;
    for (const Task &t : c.tasks())
      if (t.role == role) {
        llvm::json::Object entry{{"host", t.host}};
        if (isTraining(role))
          entry["gpus"] = (int64_t)t.gpus;
        list.push_back(std::move(entry));
      }
    if (!list.empty())
      roles[taskRoleName(role)] = std::move(list);
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::formatv("{0}", llvm::json::Value(std::move(roles)));
  return os.str();
}

} // namespace graphc
