// A key's wake and queue names, computed in C++ (mysql_names.hpp), without a server: SHA-256
// against FIPS 180-4's examples and inputs at every padding boundary, and the names' shape. The
// same names against the server's SHA2() are in mysql_names_cell_test.cpp.
#include <doctest/doctest.h>

#include <string>

#include "backends/mysql/mysql_names.hpp"

using namespace dblock;

TEST_SUITE("mysql.names") {
  TEST_CASE("sha256_hex: FIPS 180-4's examples and each padding boundary") {
    CHECK(mysql::sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    CHECK(mysql::sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    CHECK(mysql::sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
          "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    // 55 bytes fit one block with the length; 56 need a second; 64, 119, 120: more blocks.
    const std::pair<int, const char*> a_times[] = {
        {55, "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"},
        {56, "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"},
        {63, "7d3e74a05d7db15bce4ad9ec0658ea98e3f06eeecf16b4c6fff2da457ddc2f34"},
        {64, "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"},
        {65, "635361c48bb9eab14198e76ea8ab7f1a41685d6ad62aa9146d301d4f17eb0ae0"},
        {119, "31eba51c313a5c08226adf18d4a359cfdfd8d2e816b13f4af952f7ea6584dcfb"},
        {120, "2f3d335432c70b580af0e8e1b3674a7c020d683aa5f73aaaedfdc55af904c21c"},
        {1000, "41edece42d63e8d9bf515a9ba6932e1c20cbc9f5a5d134645adb5db1b9737ea3"},
    };
    for (const auto& [n, digest] : a_times) {
      CAPTURE(n);
      CHECK(mysql::sha256_hex(std::string(static_cast<std::size_t>(n), 'a')) == digest);
    }
  }

  TEST_CASE("a key's names: database, NUL, prefix, NUL, key; at most 64 characters") {
    // SHA-256 of "dblock_test\0dblock_\0job".
    const std::string digest = "35a8fbac05ee4dcfc11e2515e9a7dcdf9c4e5e440f05b39e1b565fe2704ba19e";
    CHECK(mysql::wake_name("dblock_test", "dblock_", "job") == "dblock-wake:" + digest.substr(0, 52));
    CHECK(mysql::queue_name("dblock_test", "dblock_", "job") == "dblock-queue:" + digest.substr(0, 51));
    CHECK(mysql::wake_name("dblock_test", "dblock_", "job").size() == 64);
    CHECK(mysql::queue_name("dblock_test", "dblock_", "job").size() == 64);
    // Another database or prefix, another name: the NUL bytes keep "ab" + "c" from "a" + "bc".
    CHECK(mysql::wake_name("db", "ab", "c") != mysql::wake_name("db", "a", "bc"));
    CHECK(mysql::wake_name("db2", "dblock_", "job") != mysql::wake_name("db", "dblock_", "job"));
  }
}
