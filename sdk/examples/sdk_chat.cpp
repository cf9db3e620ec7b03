// A streaming chat loop with the native SDK: each line from stdin is a user
// turn; the assistant's answer streams back as it is generated and joins
// the conversation.
//
//   sdk_chat HOST:PORT SECRET_FILE

#include <iostream>
#include <string>

#include <tessera/sdk.hpp>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: sdk_chat HOST:PORT SECRET_FILE\n";
    return 2;
  }
  try {
    auto client = tessera::sdk::client::connect(argv[1], {.cluster_secret_file = argv[2]});
    std::vector<tessera::sdk::chat_message> conversation;
    std::string line;
    std::cout << "> " << std::flush;
    while (std::getline(std::cin, line)) {
      conversation.push_back({"user", line});
      tessera::sdk::request r;
      r.messages = conversation;
      r.params.max_tokens = 128;
      auto s = client->submit(r);
      std::string answer;
      while (auto c = s.next()) {
        std::cout << c->text << std::flush;
        answer += c->text;
      }
      conversation.push_back({"assistant", answer});
      std::cout << "\n> " << std::flush;
    }
  } catch (const tessera::sdk::error& e) {
    std::cerr << "\nerror " << e.http_status() << ": " << e.what() << "\n";
    return 1;
  }
}
