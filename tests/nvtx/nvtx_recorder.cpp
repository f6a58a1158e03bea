// An NVTX injection library that records what the program emits, so tests can check the
// ranges without Nsight.
//
// Load it by naming it in NVTX_INJECTION64_PATH: the program's first NVTX call dlopens it
// and calls InitializeInjectionNvtx2, which writes our callbacks into the NVTX function
// tables (module CORE for the non-domain API and thread names, CORE2 for domains).
// Recorded: push/pop, start/end, marks, domain creation, registered strings (resolved to
// their text), category names and OS thread names, each with the OS thread id and a
// process-wide sequence number.
//
// Output: JSON lines in `$DDPB_NVTX_RECORD.<pid>`, one file per process (launched ranks
// inherit the environment), written at process exit or when `ddpb_nvtx_recorder_dump` is
// called (found with dlsym). Each write replaces the file atomically (tmp + rename) with
// everything recorded so far. Without DDPB_NVTX_RECORD nothing is written.
//
// Thread-safety: every callback takes one mutex; the recorder is never destroyed, so
// threads still emitting ranges during exit remain safe.
#include <nvtx3/nvToolsExt.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>
#include <vector>

namespace {

struct DomainRecord {
  std::string name;
};

struct StringRecord {
  std::string text;
};

struct Event {
  uint64_t seq = 0;
  std::string type;  // push pop start end mark domain string category thread_name
  std::string domain;
  std::string message;
  uint32_t category = 0;
  int32_t payload_type = 0;
  uint64_t payload = 0;     // valid for NVTX_PAYLOAD_TYPE_UNSIGNED_INT64
  uint64_t id = 0;          // start/end range id
  uint64_t tid = 0;         // calling OS thread
  uint64_t target_tid = 0;  // thread_name: the thread being named
};

class Recorder {
 public:
  nvtxDomainHandle_t create_domain(const char* name) {
    std::lock_guard lock(mutex_);
    std::string n = name ? name : "";
    auto& slot = domains_by_name_[n];
    if (!slot) {
      domains_.push_back(DomainRecord{n});
      slot = &domains_.back();
      Event e = make_event("domain", nullptr);
      e.domain = n;
      push(std::move(e));
    }
    return reinterpret_cast<nvtxDomainHandle_t>(slot);
  }

  nvtxStringHandle_t register_string(nvtxDomainHandle_t domain, const char* text) {
    std::lock_guard lock(mutex_);
    strings_.push_back(StringRecord{text ? text : ""});
    StringRecord* s = &strings_.back();
    valid_strings_.insert(s);
    Event e = make_event("string", domain);
    e.message = s->text;
    push(std::move(e));
    return reinterpret_cast<nvtxStringHandle_t>(s);
  }

  void name_category(nvtxDomainHandle_t domain, uint32_t category, const char* name) {
    std::lock_guard lock(mutex_);
    Event e = make_event("category", domain);
    e.category = category;
    e.message = name ? name : "";
    push(std::move(e));
  }

  void name_thread(uint32_t thread_id, const char* name) {
    std::lock_guard lock(mutex_);
    Event e = make_event("thread_name", nullptr);
    e.target_tid = thread_id;
    e.message = name ? name : "";
    push(std::move(e));
  }

  // push, start and mark; returns the new range id for start.
  uint64_t record(const char* type, nvtxDomainHandle_t domain, const nvtxEventAttributes_t* a) {
    std::lock_guard lock(mutex_);
    Event e = make_event(type, domain);
    if (a) {
      e.message = message_of(*a);
      e.category = a->category;
      e.payload_type = a->payloadType;
      if (a->payloadType == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64) e.payload = a->payload.ullValue;
    }
    if (e.type == "start") e.id = next_range_id_++;
    const uint64_t id = e.id;
    push(std::move(e));
    return id;
  }

  // push and mark with a bare message (non-domain API).
  void record_ascii(const char* type, const char* message) {
    std::lock_guard lock(mutex_);
    Event e = make_event(type, nullptr);
    e.message = message ? message : "";
    push(std::move(e));
  }

  uint64_t record_start_ascii(const char* message) {
    std::lock_guard lock(mutex_);
    Event e = make_event("start", nullptr);
    e.message = message ? message : "";
    e.id = next_range_id_++;
    const uint64_t id = e.id;
    push(std::move(e));
    return id;
  }

  void record_end(nvtxDomainHandle_t domain, uint64_t id) {
    std::lock_guard lock(mutex_);
    Event e = make_event("end", domain);
    e.id = id;
    push(std::move(e));
  }

  void record_pop(nvtxDomainHandle_t domain) {
    std::lock_guard lock(mutex_);
    push(make_event("pop", domain));
  }

  // Writes every event so far to $DDPB_NVTX_RECORD.<pid>; 0 on success.
  int dump() {
    const char* base = std::getenv("DDPB_NVTX_RECORD");
    if (!base || !*base) return 1;
    std::lock_guard lock(mutex_);
    const long pid = static_cast<long>(::getpid());
    const std::string path = std::string(base) + "." + std::to_string(pid);
    const std::string tmp = path + ".tmp";
    std::FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f) return 2;
    for (const Event& e : events_) {
      nlohmann::json j = {{"seq", e.seq}, {"type", e.type}, {"pid", pid}, {"tid", e.tid}};
      if (e.type != "thread_name") j["domain"] = e.domain;
      if (e.type != "pop" && e.type != "end" && e.type != "domain") j["message"] = e.message;
      if (e.type == "push" || e.type == "start" || e.type == "mark" || e.type == "category") {
        j["category"] = e.category;
      }
      if (e.payload_type != 0) j["payload_type"] = e.payload_type;
      if (e.payload_type == NVTX_PAYLOAD_TYPE_UNSIGNED_INT64) j["payload"] = e.payload;
      if (e.type == "start" || e.type == "end") j["id"] = e.id;
      if (e.type == "thread_name") j["target_tid"] = e.target_tid;
      const std::string line = j.dump() + "\n";
      std::fwrite(line.data(), 1, line.size(), f);
    }
    const bool ok = std::fflush(f) == 0 && ::fsync(::fileno(f)) == 0;
    if (std::fclose(f) != 0 || !ok) return 3;
    return std::rename(tmp.c_str(), path.c_str()) == 0 ? 0 : 4;
  }

 private:
  // Caller holds mutex_.
  Event make_event(const char* type, nvtxDomainHandle_t domain) {
    Event e;
    e.type = type;
    e.tid = static_cast<uint64_t>(::syscall(SYS_gettid));
    // A null handle is NVTX's default domain (the non-domain API).
    e.domain = domain ? reinterpret_cast<const DomainRecord*>(domain)->name : "";
    return e;
  }

  void push(Event e) {
    e.seq = next_seq_++;
    events_.push_back(std::move(e));
  }

  // Caller holds mutex_.
  std::string message_of(const nvtxEventAttributes_t& a) const {
    switch (a.messageType) {
      case NVTX_MESSAGE_TYPE_ASCII:
        return a.message.ascii ? a.message.ascii : "";
      case NVTX_MESSAGE_TYPE_REGISTERED: {
        auto* s = reinterpret_cast<const StringRecord*>(a.message.registered);
        return valid_strings_.count(s) ? s->text : "<unregistered string handle>";
      }
      case NVTX_MESSAGE_TYPE_UNICODE: {
        std::string out;
        for (const wchar_t* w = a.message.unicode; w && *w; ++w) {
          out.push_back(*w < 128 ? static_cast<char>(*w) : '?');
        }
        return out;
      }
      default:
        return "";
    }
  }

  std::mutex mutex_;
  std::deque<DomainRecord> domains_;  // deque: handles are addresses, which must stay put
  std::map<std::string, DomainRecord*> domains_by_name_;
  std::deque<StringRecord> strings_;
  std::unordered_set<const StringRecord*> valid_strings_;
  std::vector<Event> events_;
  uint64_t next_seq_ = 0;
  uint64_t next_range_id_ = 1;  // 0 is never a valid range id
};

Recorder& recorder() {
  static Recorder* r = new Recorder;  // never destroyed, see the header comment
  return *r;
}

thread_local int t_depth = 0;  // push/pop nesting level per thread, as NVTX returns it

// ---- CORE2 (domain API) callbacks ----

nvtxDomainHandle_t NVTX_API domain_create_a(const char* name) {
  return recorder().create_domain(name);
}
void NVTX_API domain_destroy(nvtxDomainHandle_t) {}
nvtxStringHandle_t NVTX_API domain_register_string_a(nvtxDomainHandle_t d, const char* s) {
  return recorder().register_string(d, s);
}
void NVTX_API domain_name_category_a(nvtxDomainHandle_t d, uint32_t category, const char* name) {
  recorder().name_category(d, category, name);
}
int NVTX_API domain_range_push_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  recorder().record("push", d, a);
  return t_depth++;
}
int NVTX_API domain_range_pop(nvtxDomainHandle_t d) {
  recorder().record_pop(d);
  return t_depth > 0 ? --t_depth : -1;
}
nvtxRangeId_t NVTX_API domain_range_start_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  return recorder().record("start", d, a);
}
void NVTX_API domain_range_end(nvtxDomainHandle_t d, nvtxRangeId_t id) {
  recorder().record_end(d, id);
}
void NVTX_API domain_mark_ex(nvtxDomainHandle_t d, const nvtxEventAttributes_t* a) {
  recorder().record("mark", d, a);
}

// ---- CORE (default domain) callbacks: recorded so that stray ranges outside the
// product's domain show up in the trace ----

int NVTX_API range_push_ex(const nvtxEventAttributes_t* a) {
  return domain_range_push_ex(nullptr, a);
}
int NVTX_API range_push_a(const char* message) {
  recorder().record_ascii("push", message);
  return t_depth++;
}
int NVTX_API range_pop() {
  return domain_range_pop(nullptr);
}
nvtxRangeId_t NVTX_API range_start_ex(const nvtxEventAttributes_t* a) {
  return domain_range_start_ex(nullptr, a);
}
nvtxRangeId_t NVTX_API range_start_a(const char* message) {
  return recorder().record_start_ascii(message);
}
void NVTX_API range_end(nvtxRangeId_t id) {
  recorder().record_end(nullptr, id);
}
void NVTX_API mark_ex(const nvtxEventAttributes_t* a) {
  domain_mark_ex(nullptr, a);
}
void NVTX_API mark_a(const char* message) {
  recorder().record_ascii("mark", message);
}
void NVTX_API name_category_a(uint32_t category, const char* name) {
  recorder().name_category(nullptr, category, name);
}
void NVTX_API name_os_thread_a(uint32_t thread_id, const char* name) {
  recorder().name_thread(thread_id, name);
}

template <typename Fn>
bool install(NvtxFunctionTable table, unsigned int size, unsigned int id, Fn fn) {
  if (!table || id >= size || !table[id]) return false;
  *table[id] = reinterpret_cast<NvtxFunctionPointer>(fn);
  return true;
}

__attribute__((destructor)) void dump_at_exit() {
  recorder().dump();
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int ddpb_nvtx_recorder_dump() {
  return recorder().dump();
}

__attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get_export_table) {
  if (!get_export_table) return 0;
  auto* callbacks =
      static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (!callbacks || callbacks->struct_size < sizeof(NvtxExportTableCallbacks) ||
      !callbacks->GetModuleFunctionTable) {
    return 0;
  }
  if (auto* version =
          static_cast<const NvtxExportTableVersionInfo*>(get_export_table(NVTX_ETID_VERSIONINFO));
      version && version->struct_size >= sizeof(NvtxExportTableVersionInfo) &&
      version->SetInjectionNvtxVersion) {
    version->SetInjectionNvtxVersion(NVTX_VERSION);
  }

  NvtxFunctionTable core2 = nullptr;
  unsigned int core2_size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE2, &core2, &core2_size)) return 0;
  bool ok = true;
  ok &= install(core2, core2_size, NVTX_CBID_CORE2_DomainCreateA, domain_create_a);
  ok &= install(core2, core2_size, NVTX_CBID_CORE2_DomainDestroy, domain_destroy);
  ok &= install(core2, core2_size, NVTX_CBID_CORE2_DomainRegisterStringA, domain_register_string_a);
  ok &= install(core2, core2_size, NVTX_CBID_CORE2_DomainNameCategoryA, domain_name_category_a);
  ok &= install(core2, core2_size, NVTX_CBID_CORE2_DomainRangePushEx, domain_range_push_ex);
  ok &= install(core2, core2_size, NVTX_CBID_CORE2_DomainRangePop, domain_range_pop);
  ok &= install(core2, core2_size, NVTX_CBID_CORE2_DomainRangeStartEx, domain_range_start_ex);
  ok &= install(core2, core2_size, NVTX_CBID_CORE2_DomainRangeEnd, domain_range_end);
  ok &= install(core2, core2_size, NVTX_CBID_CORE2_DomainMarkEx, domain_mark_ex);

  NvtxFunctionTable core = nullptr;
  unsigned int core_size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &core_size)) return 0;
  ok &= install(core, core_size, NVTX_CBID_CORE_RangePushEx, range_push_ex);
  ok &= install(core, core_size, NVTX_CBID_CORE_RangePushA, range_push_a);
  ok &= install(core, core_size, NVTX_CBID_CORE_RangePop, range_pop);
  ok &= install(core, core_size, NVTX_CBID_CORE_RangeStartEx, range_start_ex);
  ok &= install(core, core_size, NVTX_CBID_CORE_RangeStartA, range_start_a);
  ok &= install(core, core_size, NVTX_CBID_CORE_RangeEnd, range_end);
  ok &= install(core, core_size, NVTX_CBID_CORE_MarkEx, mark_ex);
  ok &= install(core, core_size, NVTX_CBID_CORE_MarkA, mark_a);
  ok &= install(core, core_size, NVTX_CBID_CORE_NameCategoryA, name_category_a);
  ok &= install(core, core_size, NVTX_CBID_CORE_NameOsThreadA, name_os_thread_a);
  if (!ok) std::fprintf(stderr, "ddpb_nvtx_recorder: an NVTX callback slot is missing\n");
  return ok ? 1 : 0;
}

}  // extern "C"
