#include "gateway/admin/listing_access.h"

#include "gateway/admin/admin_auth.h"

namespace loragate {

std::optional<ApiError> check_listing_access(const ListingAccess& access, const HttpRequest& request) {
  if (access.public_listings) return std::nullopt;
  std::optional<ApiError> denied = check_admin_token(request, access.admin_token);
  if (denied) denied->message = "listings are private (server.public_listings: false): " + denied->message;
  return denied;
}

}  // namespace loragate
