"""AWS answers moto does not give, as the real API words them."""

from __future__ import annotations

REFRESH_IN_PROGRESS = b"""<DescribeInstanceRefreshesResponse xmlns="https://autoscaling.amazonaws.com/doc/2011-01-01/">
<DescribeInstanceRefreshesResult><InstanceRefreshes><member><InstanceRefreshId>r-1</InstanceRefreshId>
<AutoScalingGroupName>g</AutoScalingGroupName><Status>InProgress</Status></member></InstanceRefreshes>
</DescribeInstanceRefreshesResult><ResponseMetadata><RequestId>r</RequestId></ResponseMetadata>
</DescribeInstanceRefreshesResponse>"""
