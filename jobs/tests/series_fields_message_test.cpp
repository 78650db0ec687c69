// The series fields to and from the API's messages by name (series_fields_message.h): every message
// that carries a series has a field for each declared series field, and the fields go there and back.
#include "qgate/jobs/series_fields_message.h"

#include <gtest/gtest.h>

#include "qgate/db/store_error.h"
#include "qgate/v1/harness.pb.h"

namespace qgate::jobs {
namespace {

db::SeriesFields sample_fields() {
  db::SeriesFields fields;
  fields.profile = "llama-7b-q4_K_M";
  fields.weight_type = "q4_K";
  fields.path = "mmq";
  fields.tokens = 512;
  fields.backend = "cuda";
  fields.gpu_name = "NVIDIA H200";
  fields.settings = "n_batch=1024";
  return fields;
}

TEST(SeriesFieldsMessage, EveryMessageThatCarriesASeriesHasAFieldForEachSeriesField) {
  // A series field declared in the store without its field in these messages would reach no client.
  for (const auto* type : {v1::TrendPoint::descriptor(), v1::ExternalResult::descriptor(),
                           v1::CompareRow::descriptor(), v1::ChangeSeries::descriptor()}) {
    EXPECT_EQ(series_fields_missing_from(*type), std::vector<std::string>{}) << type->full_name();
  }
  // And a message without them says which.
  const auto missing = series_fields_missing_from(*v1::Build::descriptor());
  EXPECT_NE(std::find(missing.begin(), missing.end(), "weight_type"), missing.end());
}

TEST(SeriesFieldsMessage, FieldsGoIntoAMessageAndComeBackUnchanged) {
  v1::ExternalResult message;
  write_series_fields(sample_fields(), message);
  EXPECT_EQ(message.profile(), "llama-7b-q4_K_M");
  EXPECT_EQ(message.weight_type(), "q4_K");
  EXPECT_EQ(message.tokens(), 512);
  EXPECT_EQ(message.settings(), "n_batch=1024");
  EXPECT_EQ(read_series_fields(message), sample_fields());
}

TEST(SeriesFieldsMessage, NoWeightTypeIsAnEmptyFieldAndAnEmptyFieldIsNone) {
  db::SeriesFields fields = sample_fields();
  fields.weight_type.reset();
  v1::TrendPoint point;
  write_series_fields(fields, point);
  EXPECT_EQ(point.weight_type(), "");
  v1::ExternalResult result;
  result.set_profile("p");
  const db::SeriesFields read = read_series_fields(result);
  EXPECT_FALSE(read.weight_type.has_value());
  EXPECT_EQ(read.profile, "p");
}

TEST(SeriesFieldsMessage, ANameThatIsNoSeriesFieldIsRefused) {
  db::SeriesFields fields;
  EXPECT_THROW(db::set_series_field(fields, "tok_per_s", std::string("1")), db::StoreError);
  EXPECT_THROW(db::set_series_field(fields, "tokens", std::string("many")), db::StoreError);
}

}  // namespace
}  // namespace qgate::jobs
