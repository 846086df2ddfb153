#include "controller/grpc/message_codec.h"

#include <map>
#include <optional>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/unknown_field_set.h>

#include "absl/strings/str_cat.h"
#include "controller/grpc/utf8_text.h"

namespace tessera::grpc_api {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

// Whether `bytes` decodes as a packed run of `field`'s values.
bool IsWellFormedPacked(const FieldDescriptor& field, std::string_view bytes) {
  switch (FieldDescriptor::TypeToCppType(field.type())) {
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return bytes.size() % 8 == 0;
    case FieldDescriptor::CPPTYPE_FLOAT:
      return bytes.size() % 4 == 0;
    default:
      break;
  }
  if (field.type() == FieldDescriptor::TYPE_FIXED32 ||
      field.type() == FieldDescriptor::TYPE_SFIXED32) {
    return bytes.size() % 4 == 0;
  }
  if (field.type() == FieldDescriptor::TYPE_FIXED64 ||
      field.type() == FieldDescriptor::TYPE_SFIXED64) {
    return bytes.size() % 8 == 0;
  }
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  uint64_t value = 0;
  while (in.BytesUntilLimit() > 0) {
    if (!in.ReadVarint64(&value)) return false;
  }
  return true;
}

// DescribeInvalidMessage for the message at `path` ("" for the request itself).
std::string Describe(const Descriptor& type, std::string_view bytes, const std::string& path) {
  UnknownFieldSet fields;
  if (!fields.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    if (path.empty()) return "the bytes are not protobuf wire format (truncated or garbled)";
    return absl::StrCat(path, ": not a well-formed ", type.full_name(), " (truncated or garbled)");
  }
  const bool proto3 = type.file()->syntax() == FileDescriptor::SYNTAX_PROTO3;
  std::map<int, int> occurrences;  // per field number: the index of a repeated field's element
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& wire = fields.field(i);
    const FieldDescriptor* field = type.FindFieldByNumber(wire.number());
    if (field == nullptr || wire.type() != UnknownField::TYPE_LENGTH_DELIMITED) continue;
    const std::string& value = wire.length_delimited();
    const std::string name = path.empty() ? field->name() : absl::StrCat(path, ".", field->name());
    if (field->is_packable()) {
      if (!IsWellFormedPacked(*field, value)) {
        return absl::StrCat(name, ": malformed packed ", field->type_name(), " values");
      }
      continue;
    }
    const int index = occurrences[wire.number()]++;
    const std::string element = field->is_repeated() ? absl::StrCat(name, "[", index, "]") : name;
    if (field->type() == FieldDescriptor::TYPE_STRING && proto3) {
      if (std::optional<size_t> bad = FirstInvalidUtf8Byte(value); bad.has_value()) {
        return absl::StrCat(element, ": expected UTF-8 text (a proto3 string), byte ", *bad,
                            " is 0x",
                            absl::Hex(static_cast<uint8_t>(value[*bad]), absl::kZeroPad2));
      }
    } else if (field->type() == FieldDescriptor::TYPE_MESSAGE) {
      std::string why = Describe(*field->message_type(), value, element);
      if (!why.empty()) return why;
    }
  }
  return "";
}

}  // namespace

std::string DescribeInvalidMessage(const Descriptor& type, std::string_view bytes) {
  return Describe(type, bytes, "");
}

absl::Status ParseRequest(std::string_view bytes, google::protobuf::Message* message) {
  if (message->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::OkStatus();
  }
  std::string why = DescribeInvalidMessage(*message->GetDescriptor(), bytes);
  if (why.empty()) why = "protobuf could not parse it";
  message->Clear();
  return absl::InvalidArgumentError(
      absl::StrCat("the request is not a valid ", message->GetTypeName(), ": ", why));
}

absl::Status ParseRequest(const grpc::ByteBuffer& bytes, google::protobuf::Message* message) {
  grpc::Slice slice;
  if (!bytes.DumpToSingleSlice(&slice).ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("the request is not a valid ", message->GetTypeName(), ": it is unreadable"));
  }
  return ParseRequest(std::string_view(reinterpret_cast<const char*>(slice.begin()), slice.size()),
                      message);
}

grpc::Status SerializeResponse(const google::protobuf::Message& message, grpc::ByteBuffer* out) {
  std::string bytes;
  if (!message.SerializeToString(&bytes)) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        absl::StrCat("cannot serialize the ", message.GetTypeName(), " answer"));
  }
  grpc::Slice slice(bytes);
  *out = grpc::ByteBuffer(&slice, 1);
  return grpc::Status::OK;
}

}  // namespace tessera::grpc_api
