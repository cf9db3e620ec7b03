// ThreadSanitizer suppressions for the kv store tests (used only when the
// test is built with -fsanitize=thread; otherwise an unused function).
//
// Debian's librocksdb is not built with ThreadSanitizer. Its memtable is a
// lock-free skip list published through std::atomic, which TSan cannot see
// in uninstrumented code, while the memcpy/memcmp RocksDB does are still
// intercepted: a Get racing a Put is reported as a race inside RocksDB
// (MemTable::Add against a memtable look-up). Reports with a RocksDB frame
// on either stack are therefore suppressed; races between our own threads
// (tiers, queue, events, stats) are still reported. Building RocksDB with
// -fsanitize=thread would give a verdict on RocksDB itself (see README.md
// for the same approach with CAF).
extern "C" const char* __tsan_default_suppressions() {
  return "race:librocksdb.so\n";
}
