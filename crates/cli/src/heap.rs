//! The process's allocator: jemalloc, whose statistics `/metrics` reports
//! ([`airlock_service::heap`] says why it is not glibc's malloc).

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
