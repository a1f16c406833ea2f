#pragma once
// PostgreSQL as the registry knows it (backends/backend_descriptor.hpp): a module.

#include <array>

#include "backends/backend_descriptor.hpp"

namespace dblock::postgres {

inline constexpr std::array<std::string_view, 2> schemes{"postgres", "postgresql"};
inline constexpr std::array<Strategy, 4> strategies{Strategy::lease, Strategy::advisory, Strategy::for_update,
                                                    Strategy::txn_insert};

inline constexpr BackendDescriptor descriptor{"postgres", schemes, strategies, "dblock-postgres.so", "dblock-postgres", '"', true};

}  // namespace dblock::postgres
