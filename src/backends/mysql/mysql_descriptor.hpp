#pragma once
// MySQL and MariaDB as the registry knows them (backends/backend_descriptor.hpp): a module.

#include <array>

#include "backends/backend_descriptor.hpp"

namespace dblock::mysql {

inline constexpr std::array<std::string_view, 2> schemes{"mysql", "mariadb"};
inline constexpr std::array<Strategy, 4> strategies{Strategy::lease, Strategy::advisory, Strategy::for_update,
                                                    Strategy::txn_insert};

inline constexpr BackendDescriptor descriptor{"mysql", schemes, strategies, "dblock-mysql.so", "dblock-mysql", '`', true};

}  // namespace dblock::mysql
