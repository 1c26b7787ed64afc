#include "runtime.hpp"

namespace beehive::detail {

Runtime::Runtime(caf::actor_system* sys, std::shared_ptr<Store> store,
                 const std::vector<Option>& opts)
    : store_(std::move(store)), settings_(OptionSet::from(opts)) {
  if (!store_) throw Error(errc::invalid_argument, "no store");
  backend_ = &store::backend_of(*store_);
  clock_ = settings_.clock ? settings_.clock : std::make_shared<SystemClock>();
  if (sys) {
    sys_ = sys;
  } else {
    own_cfg_ = std::make_unique<caf::actor_system_config>();
    own_sys_ = std::make_unique<caf::actor_system>(*own_cfg_);
    sys_ = own_sys_.get();
  }
  auto cfg = std::make_shared<StoreWriterConfig>();
  cfg->writer = backend_->open_writer();
  cfg->clock = clock_;
  // Detached: the writer blocks on disk, and a dedicated thread makes the blocking
  // hand-off one wake each way.
  writer_ = sys_->spawn<caf::detached>(detail::store_writer, std::move(cfg));
  writer_public_ = caf::actor_cast<store_writer_actor>(writer_);
}

Runtime::~Runtime() { shutdown(); }

void Runtime::ensure_running() const {
  if (stopped_.load(std::memory_order_acquire)) throw Error(errc::stopped, "beehive stopped");
}

WriteReply Runtime::write(const Context& ctx, WriteOp op, RowCheck check) {
  ensure_running();
  ctx.throw_if_done();
  auto w = std::make_shared<BlockingWrite>();
  w->op = std::move(op);
  w->check = std::move(check);
  auto reply = w->reply;
  caf::anon_send(writer_, std::move(w));
  return reply->take(ctx);
}

void Runtime::shutdown() {
  if (stopped_.exchange(true)) return;
  caf::anon_send_exit(writer_, caf::exit_reason::user_shutdown);
  {
    caf::scoped_actor self{*sys_, true};
    self->wait_for(writer_);
  }
  writer_ = nullptr;
  writer_public_ = nullptr;
}

}  // namespace beehive::detail
